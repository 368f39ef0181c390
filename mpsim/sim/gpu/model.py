"""One launch on a GPU: its kernels' CTA work, bundles, SimPy runs, the power-limited clock.

A launch row becomes one or more kernels (the work builder of its kernel's library room, through the
one dispatch table mpsim/sim/gpu/library/), each run in its own SimPy environment
back to back; a kernel finds what the one before it wrote in L2 (up to the usable share: its DRAM
reads less that), and a launch measured once from idle (`one_run`) ends with up to that share of
its output unwritten; each kernel adds its fixed cost (`fixed_ns`) and the kernel floor. Each kernel's
time is also split into named parts (memory, math, issue, fixed; mpsim/sim/gpu/parts.py), summed
over the launch's kernels.

The clock is a post-pass: a launch first runs at the boost clock; its per-cycle work (tensor and
CUDA-core busy shares, L2 and DRAM bytes) priced by the power model (power.py: the board's TDP,
static power, base/boost clocks and the energy block of the hardware file) gives the sustained clock
f_s, the highest clock within the TDP, and the launch runs again at f_s (SimParams.power_iterations
times, or until the clock settles to 1e-4). Launches whose work fits the TDP at boost keep the boost
clock. That is the clock of back-to-back replays (a CUDA graph, every protocol but one). A launch
measured once from idle (config `one_run`: TensorRT's per-layer profiler) starts at boost and decays
to f_s with SimParams.power_tau_us (`one_run_clock`), and runs again at that average clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mpsim.hw_models.schema import GpuSpec
from mpsim.sim.gpu.cta import GpuLaunchSim
from mpsim.sim.gpu.library import launch_kernels, work_for
from mpsim.sim.gpu.memory import usable_l2
from mpsim.sim.gpu.parts import kernel_parts
from mpsim.sim.gpu.power import core_joules_per_cycle, dram_dynamic_j, sustained_clock, tensor_energy_share
from mpsim.sim.gpu.rates import GpuRates, gpu_rates, port_rate
from mpsim.sim.gpu.work import LaunchWork, bundles, cuda_cycles, tensor_cycles
from mpsim.sim.params import SimParams
from mpsim.sim.result import BODY_PARTS, LaunchOutcome, pick_bound

UNIT_NAMES = ("dram", "l2", "tensor", "cuda")
FP8_MMA = "fp8"  # a trip's mma_dtype whose tensor cycles util["tensor_fp8"] counts


def launch_config(row: Mapping[str, Any]) -> tuple[dict[str, int], list[int]]:
    """The `config` and `grid` JSON columns of a trace row, parsed."""
    try:
        cfg, grid = json.loads(str(row["config"])), json.loads(str(row["grid"]))
    except ValueError as exc:
        raise ValueError(f"launch {row.get('launch_id')}: config/grid is not JSON ({exc})") from None
    if not isinstance(cfg, dict) or not isinstance(grid, list) or not grid:
        raise ValueError(f"launch {row.get('launch_id')}: config must be a JSON object and grid a "
                         f"non-empty list, got {row['config']!r} and {row['grid']!r}")
    return cfg, [int(g) for g in grid]


def launch_work(row: Mapping[str, Any], r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    cfg, grid = launch_config(row)
    return work_for(str(row["kernel"]))(row, cfg, grid, r, p, resident)


def back_to_back(parts: LaunchWork, r: GpuRates, p: SimParams) -> LaunchWork:
    """Kernels run back to back: each finds what the one before it wrote in L2 (up to the usable
    share), which its DRAM reads are less of (the simulation, `_run`, and its pruning bound,
    `lower_bound_s`, both run a launch's kernels through this)."""
    out, carried = [], 0.0
    for part in parts:
        work = part.work
        if carried > 0 and work.dram_read_bytes > 0:
            work = replace(work, dram_read_bytes=work.dram_read_bytes - min(carried, work.dram_read_bytes))
            part = replace(part, work=work)
        carried = min(work.written_bytes, usable_l2(r, p))
        out.append(part)
    return out


def _run(parts: LaunchWork, r: GpuRates, p: SimParams, row: Mapping[str, Any]) -> LaunchOutcome:
    cycles = 0.0
    dram = l2 = 0.0
    busy = dict.fromkeys(UNIT_NAMES, 0.0)
    util = dict.fromkeys((*UNIT_NAMES, "tensor_fp8"), 0.0)
    named = dict.fromkeys(BODY_PARTS, 0.0)  # cycles per named part (docs/simulator.md#time-parts)
    # timed once from idle: the write-back L2 still holds up to its usable share of the outputs
    unwritten = usable_l2(r, p) if launch_config(row)[0].get("one_run") else 0.0
    for part in back_to_back(parts, r, p):
        occ, work = part.occupancy, part.work
        plan = bundles(work, r.sms * occ.ctas_per_sm, r.sms, p)
        held = min(unwritten, work.written_bytes)  # the launch's kernels share the L2 it holds
        unwritten -= held
        sim = GpuLaunchSim(r, work, occ.ctas_per_sm, occ.stages, held)
        body = sim.run(plan)
        fixed = work.fixed_ns * 1e-9 * r.clock_hz + r.floor_cycles
        total = body + fixed
        for name, cyc in kernel_parts(sim, body, fixed, occ.ctas_per_sm).items():
            named[name] += cyc
        for name, frac in sim.busy(body).items():
            busy[name] += frac * body
        shares = sim.utilization(body)
        for name, frac in shares.items():
            util[name] += frac * body
        if work.trip.mma_dtype == FP8_MMA:
            util["tensor_fp8"] += shares["tensor"] * body
        cycles += total
        dram += sim.dram.bytes
        l2 += sim.l2_bytes
    kernel_s = cycles / r.clock_hz
    overhead = float(r.launch_cost.cost_s(launch_kernels(row)))
    last = parts[-1]
    return LaunchOutcome(
        cycles=cycles, clock_hz=r.clock_hz, overhead_s=overhead, bytes_dram=dram, bytes_l2=l2,
        util={k: v / cycles for k, v in util.items()},
        bound=pick_bound({k: v / cycles for k, v in busy.items()}, kernel_s, overhead),
        ctas_per_sm=float(last.occupancy.ctas_per_sm),
        waves=last.work.total_ctas / (r.sms * last.occupancy.ctas_per_sm),
        parts={k: v / r.clock_hz for k, v in named.items()})


def tensor_flops(parts: LaunchWork) -> float:
    return sum(part.work.mma_flops for part in parts)


def power_clock(hw: GpuSpec, p: SimParams, out: LaunchOutcome) -> float:
    """The power-limited SM clock of a launch whose run at `out.clock_hz` gave `out` (power.py: the
    highest clock <= boost within the TDP for its per-cycle work)."""
    boost = hw.compute.boost_clock_MHz * 1e6
    if out.cycles <= 0 or hw.energy is None:
        return boost
    j = core_joules_per_cycle(hw)
    tensor = tensor_energy_share(out.util["tensor"], out.util.get("tensor_fp8", 0.0), p)
    per_cycle = p.power_overhead * (tensor * j["tensor"] + out.util["cuda"] * j["cuda"]
                                    + out.bytes_l2 / out.cycles * j["l2"])
    dram_w = dram_dynamic_j(hw, out.bytes_dram) / (out.cycles / out.clock_hz)
    return sustained_clock(hw, p, per_cycle, dram_w)


def simulate_gpu_launch(row: Mapping[str, Any], hw: GpuSpec, p: SimParams, resident: float = 0.0,
                        clock_hz: float | None = None) -> LaunchOutcome:
    """Cycles, bytes per level, unit utilisation and bound of one launch on `hw`; at `clock_hz`
    when given, else at the power-limited clock (the post-pass above)."""
    r = gpu_rates(hw, p, clock_hz)
    parts = launch_work(row, r, p, resident)
    out = _run(parts, r, p, row)
    if clock_hz is not None:
        return out
    f = r.clock_hz
    for _ in range(p.power_iterations):
        # the clock the run at f allows; plain iteration (secant steps overshot to absurd clocks on
        # some short launches). Where a launch is L2- or DRAM-bound its power hardly moves with f,
        # so the clock can stop short of the TDP by a little (tests/sim/test_power_clock.py, SETTLE)
        f_new = power_clock(hw, p, out)
        if abs(f_new - f) <= 1e-4 * f:
            break
        f = f_new
        r = gpu_rates(hw, p, f)
        out = _run(launch_work(row, r, p, resident), r, p, row)
    if launch_config(row)[0].get("one_run") and out.clock_hz < r.boost_hz:
        f = one_run_clock(out.cycles, out.clock_hz, r.boost_hz, p.power_tau_us * 1e-6)
        r = gpu_rates(hw, p, f)
        out = _run(launch_work(row, r, p, resident), r, p, row)
    return out


def one_run_clock(cycles: float, f_s: float, boost: float, tau_s: float) -> float:
    """The average clock of `cycles` cycles run from idle: the clock starts at `boost` and decays to
    the sustained `f_s` with time constant `tau_s`, f(t) = f_s + (boost - f_s) exp(-t / tau), so the
    time T solves f_s T + (boost - f_s) tau (1 - exp(-T / tau)) = cycles (Newton steps from the
    sustained clock's time, which overestimates T; the left side is increasing and concave)."""
    if cycles <= 0 or tau_s <= 0:
        return boost if tau_s > 0 else f_s
    t = cycles / f_s
    for _ in range(50):
        g = f_s * t + (boost - f_s) * tau_s * (1 - math.exp(-t / tau_s)) - cycles
        dg = f_s + (boost - f_s) * math.exp(-t / tau_s)
        step = g / dg
        t -= step
        if abs(step) <= 1e-12 * t:
            break
    return cycles / t


def lower_bound_s(row: Mapping[str, Any], hw: GpuSpec, p: SimParams, resident: float,
                  clock_hz: float) -> float:
    """A time the SimPy run of this launch at `clock_hz` cannot beat (for pruning candidates):
    per kernel, its fixed costs plus the larger of its DRAM reads at the achievable bandwidth and the
    balanced per-SM share of its trips, each at least its tensor, CUDA-core and L2-port time."""
    r = gpu_rates(hw, p, clock_hz)
    total = 0.0
    for part in back_to_back(launch_work(row, r, p, resident), r, p):
        w = part.work
        per_class = w.class_of_range(0, w.total_ctas)
        trips = sum(cnt * w.iters_by_class[c] for c, cnt in per_class.items())
        t = w.trip
        per_trip = max(tensor_cycles(t, r), cuda_cycles(t, r), t.load_bytes / port_rate(t, r))
        # every CTA pays its prologue and its epilogue's latency; the first trip waits for its data
        ends = (w.setup_ns + w.epilogue.latency_ns) * 1e-9 * r.clock_hz
        first = 0.0 if t.latency_ns is not None else (r.dram_latency if w.miss_ratio > 0
                                                     else r.l2_latency)
        sm = math.ceil(trips / r.sms) * per_trip + first
        body = max(sm, w.dram_read_bytes / r.dram_Bpc) + ends
        total += body + w.fixed_ns * 1e-9 * r.clock_hz + r.floor_cycles
    return total / r.clock_hz + float(r.launch_cost.cost_s(launch_kernels(row)))
