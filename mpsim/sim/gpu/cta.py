"""CTA bundles as SimPy processes: the software-pipelined K-loop on SMs, L2 and HBM.

Units (all shared by every bundle of the launch): `dram` (HBM channels, achievable bandwidth,
latency), `l2` (one bandwidth server plus hit latency), `tensor` and `cuda` (one server per SM each:
tensor-core and CUDA-core pipes), `slots` (resident-CTA slots, SMs x CTAs per SM). A bundle takes
its slots, then a loader keeps up to `stages` trip loads in flight (load trip i+s while trip i
computes), and the compute loop waits for each trip's tiles, computes, and frees its buffer. After
the loop, the epilogue writes outputs and, for split launches, exchanges partials in L2.
"""

from __future__ import annotations

import math

import simpy

from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Bundle, KernelWork
from mpsim.sim.params import SimParams
from mpsim.sim.units import Memory, Proc, TokenPool


class GpuLaunchSim:
    """One launch on one GPU: the units, the bundles, and their counters."""

    def __init__(self, r: GpuRates, work: KernelWork, ctas_per_sm: int, stages: int,
                 p: SimParams) -> None:
        self.env = simpy.Environment()
        self.r, self.work, self.stages, self.p = r, work, stages, p
        self.dram = Memory(self.env, "dram", r.dram_Bpc, r.dram_latency, r.dram_channels,
                           p.dram_stripe_bytes)
        self.l2 = Memory(self.env, "l2", r.l2_Bpc, r.l2_latency)
        self.tensor = TokenPool(self.env, "tensor", r.sms)
        self.cuda = TokenPool(self.env, "cuda", r.sms)
        self.slots = simpy.Container(self.env, capacity=r.sms * ctas_per_sm, init=r.sms * ctas_per_sm)
        self.miss = work.miss_ratio

    def run(self, bundles: list[Bundle]) -> float:
        """Start the bundles in dispatch order; returns the kernel body's cycles."""
        for b in bundles:
            self.env.process(self._bundle(b))
        self.env.run()
        return float(self.env.now)

    def _per_sm(self, b: Bundle) -> int:
        return math.ceil(b.count / self.r.sms)

    def _bundle(self, b: Bundle) -> Proc:
        yield self.slots.get(b.count)
        free = simpy.Container(self.env, capacity=self.stages, init=self.stages)
        landed = [self.env.event() for _ in range(b.iters)]
        self.env.process(self._loader(b, free, landed))
        for i in range(b.iters):
            yield landed[i]
            yield from self._compute(b)
            yield free.put(1)
        yield from self._epilogue(b)
        yield self.slots.put(b.count)

    def _loader(self, b: Bundle, free: simpy.Container, landed: list[simpy.Event]) -> Proc:
        for event in landed:
            yield free.get(1)
            self.env.process(self._load(b, event))

    def _load(self, b: Bundle, landed: simpy.Event) -> Proc:
        per_cta = self.work.trip.load_bytes * b.scale
        total = b.count * per_cta
        start = self.env.now
        yield from self.dram.transfer(total * self.miss)
        yield from self.l2.transfer(total)
        # A lone SM cannot pull more than its port's share of L2 bandwidth.
        port = self._per_sm(b) * per_cta / self.r.port_Bpc - (self.env.now - start)
        # Latency scales with macro-trips so bytes in flight / latency (Little's law) is kept.
        latency = self.r.l2_latency + (self.r.dram_latency if self.miss > 0 else 0.0)
        yield self.env.timeout(max(0.0, port) + latency * b.scale)
        landed.succeed()

    def _compute(self, b: Bundle) -> Proc:
        t, r, n = self.work.trip, self.r, self._per_sm(b)
        k = min(b.count, r.sms)
        tc = n * t.mma_flops * b.scale / r.tensor_fpc
        cc = n * (t.fp_ops / r.fp32_lanes + t.int_ops / r.int_ops) * b.scale
        if t.serial or tc == 0 or cc == 0:
            yield from self.tensor.hold(k, tc)
            yield from self.cuda.hold(k, cc)
        else:
            yield self.env.all_of([self.env.process(self.tensor.hold(k, tc)),
                                   self.env.process(self.cuda.hold(k, cc))])
        yield self.env.timeout(self.p.iter_overhead_cycles * b.scale)

    def _epilogue(self, b: Bundle) -> Proc:
        e, r = self.work.epilogue, self.r
        ctas = b.count * b.repeat
        if e.ws_bytes > 0:
            yield from self.l2.transfer(ctas * e.ws_bytes)
        if e.sync:
            yield self.env.timeout(2 * r.l2_latency)
        if e.reduce_ops > 0:
            yield from self.cuda.hold(min(b.count, r.sms),
                                      self._per_sm(b) * b.repeat * e.reduce_ops / r.fp32_lanes)
        yield from self.l2.transfer(ctas * e.write_bytes)
        yield from self.dram.transfer(ctas * e.write_bytes)

    def busy(self, cycles: float) -> dict[str, float]:
        """Busy fraction of each unit over the kernel body (what picks the bound)."""
        return {"dram": self.dram.busy_fraction(cycles), "l2": self.l2.busy_fraction(cycles),
                "tensor": self.tensor.busy_fraction(cycles), "cuda": self.cuda.busy_fraction(cycles)}

    def utilization(self, cycles: float) -> dict[str, float]:
        """Share of each unit's peak used over the kernel body (DRAM against its peak, not achievable)."""
        r = self.r
        return {"dram": self.dram.bytes / (r.dram_peak_Bpc * cycles) if cycles else 0.0,
                "l2": self.l2.bytes / (r.l2_Bpc * cycles) if cycles else 0.0,
                "tensor": self.tensor.busy_fraction(cycles), "cuda": self.cuda.busy_fraction(cycles)}
