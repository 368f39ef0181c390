"""One kernel's time in named parts (docs/simulator.md#time-parts): its SimPy body split by what
bound it, plus its fixed costs.

A kernel's duration is its body (the SimPy run) + its per-launch `fixed_ns` + the kernel floor. The
body's parts come from the run's own counters, each as the cycles one SM (or the chip's HBM) was
busy:
- `memory`: the longest of HBM's busy time, an active SM's L2-port time and (when it is below the
  ports' sum: one-partition L2s, a file's override) the chip's L2 busy time;
- `math`: an active SM's tensor-pipe time; `issue`: its CUDA-core time (the busiest issue pipe or the
  issue limit: dequantization, softmax, FMAs on the fp32 lanes, reductions).
"Active SM": the busy server-cycles over min(SMs, CTAs), so a launch of fewer CTAs than SMs is
measured on the SMs it uses. Loads overlap compute (the software pipeline), so memory and compute
never both count: the larger of memory and compute (math + issue for a trip that runs them one after
the other, `Trip.serial`; else the larger of the two, the other hidden under it) is exposed, the
other is not. Exposed parts take their busy time in decreasing order, each capped at what of the
body is left; then the per-CTA setup (at most one `setup_ns` per wave of CTAs) goes to `fixed`,
and the rest of the body is `latency` (first tiles, dependent round trips, epilogues, fill and
drain, idle SMs in a last partial wave). This is a rule, not a measurement: inside SimPy the
overlap of two units is not decomposable uniquely, and a hidden unit's time shows in no part.
"""

from __future__ import annotations

import math

from mpsim.sim.gpu.cta import GpuLaunchSim


def kernel_parts(sim: GpuLaunchSim, body: float, fixed: float, ctas_per_sm: int) -> dict[str, float]:
    """Cycles of `memory`, `math`, `issue` and `fixed` of one kernel whose SimPy body took `body`
    cycles and whose fixed costs (its `fixed_ns` and the kernel floor) are `fixed` cycles; its
    `latency` is body + fixed minus these."""
    r, work = sim.r, sim.work
    active = max(1, min(r.sms, work.total_ctas))
    dram = sim.dram.pool.busy / sim.dram.pool.tokens
    l2 = sim.l2.pool.busy / sim.l2.pool.tokens if sim.l2 is not None else 0.0
    memory = max(dram, l2, sim.port.busy / active)
    tensor, cuda = sim.tensor.busy / active, sim.cuda.busy / active
    if work.trip.serial:
        compute = {"math": tensor, "issue": cuda}
    else:  # concurrent pipes: the busier one sets the pace, the other is hidden under it
        compute = {"math": tensor} if tensor >= cuda else {"issue": cuda}
    exposed = {"memory": memory} if memory >= sum(compute.values()) else compute
    out = {"memory": 0.0, "math": 0.0, "issue": 0.0}
    left = body
    for name, busy in sorted(exposed.items(), key=lambda kv: -kv[1]):
        out[name] = min(busy, left)
        left -= out[name]
    waves = math.ceil(work.total_ctas / (r.sms * max(1, ctas_per_sm)))
    setup = min(left, waves * work.setup_ns * 1e-9 * r.clock_hz)
    out["fixed"] = fixed + max(0.0, setup)
    return out
