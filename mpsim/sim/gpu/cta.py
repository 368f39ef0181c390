"""CTA bundles as SimPy processes: the software-pipelined K-loop on SMs, L2 ports and HBM.

Units (shared by every bundle of the kernel): `dram` (HBM at the achievable bandwidth, one FIFO
server), `tensor` and `cuda` (one server per SM each: the tensor-core pipe and the CUDA-core pipes),
`slots` (resident-CTA slots, SMs x CTAs per SM). A bundle takes its slots, pays its prologue, then a
loader keeps up to `stages` trip loads in flight (trip i+s loads while trip i computes) and the
compute loop waits for each trip's tiles, computes, and frees its buffer; after the loop the
epilogue writes the outputs and, for split launches, exchanges partials in L2.

A trip's load moves its bytes through the bundle's SMs' L2 ports (`port`: one server per SM, each
pulling at most `port_Bpc`; the chip's L2 is the sum of the ports unless it is one partition (Ada:
its own rate, rates.py `chip_l2_bytes_per_clk`) or a file sets it lower; that server takes the bytes
the L2 serves, `Trip.l2_bytes` where a kernel's port count holds loads it never issues) and
its misses through HBM at the same time, so the longer of the two counts, then waits a latency: a
CTA's first tile pays the full latency of the level it comes from (HBM when the launch misses, L2
otherwise: a per-tile cache model), later trips the L2 latency
plus the miss share of the extra HBM latency (hidden by the pipeline when enough stages are in
flight). So a CTA's T trips take T max(L, C) + min(L, C) + the first latency when loads and
compute overlap.

Stores: a launch's DRAM writes are posted as its trips go, each written byte taking 1 /
`dram_write_share` read bytes' time (a write stream is slower than a read stream); a trip's
`store_bytes` (a persistent CTA's tiles finishing inside its loop) and an epilogue's writes take the
SM's port; the stores that stay in L2 (`KernelWork.l2_kept_stores`: a replayed output kept there,
which no DRAM write binds) are posted into the chip's L2 where it is its own server (Ada), at 1 /
`l2_write_share` read bytes' time each (SimParams).

The CUDA-core work of a trip runs on separate issue pipes (fp32, integer ALU, conversions, SFU,
load/store) concurrently: its time is the busiest pipe or the issue limit (4 schedulers x 32 lanes
per clock), whichever is longer (mpsim/sim/gpu/rates.py). Per-pipe busy cycles are kept for the
utilisation report.
"""

from __future__ import annotations

import math

import simpy

from mpsim.sim.gpu.rates import GpuRates, port_rate
from mpsim.sim.gpu.work import CUDA_PIPES, Bundle, KernelWork, cuda_cycles, tensor_cycles
from mpsim.sim.units import Memory, Proc, TokenPool


class GpuLaunchSim:
    """One kernel on one GPU: the units, the bundles, and their counters."""

    def __init__(self, r: GpuRates, work: KernelWork, ctas_per_sm: int, stages: int,
                 unwritten: float = 0.0) -> None:
        """`unwritten`: bytes of the launch's DRAM writes still dirty in the L2 when it ends (a
        launch timed once from idle), for which no DRAM write is priced."""
        self.env = simpy.Environment()
        self.r, self.work, self.stages = r, work, max(1, stages)
        self.dram = Memory(self.env, "dram", r.dram_Bpc, r.dram_latency, write_cost=r.dram_write_cost)
        self.port = TokenPool(self.env, "port", r.sms)
        # the chip's L2 as its own server only when its rate is below the sum of the SMs' ports
        self.l2 = Memory(self.env, "l2", r.l2_Bpc, r.l2_latency, write_cost=r.l2_write_cost) \
            if r.l2_Bpc < r.port_Bpc * r.sms * (1 - 1e-9) else None
        self.tensor = TokenPool(self.env, "tensor", r.sms)
        self.cuda = TokenPool(self.env, "cuda", r.sms)
        self.slots = simpy.Container(self.env, capacity=r.sms * ctas_per_sm, init=r.sms * ctas_per_sm)
        self.miss = work.miss_ratio
        # Output written back to HBM as the loop goes (L2 write-back overlaps the main loop): a share
        # per CTA trip; a launch without trips writes at its end.
        trips = work.cta_trips
        written = max(0.0, work.written_bytes - unwritten)
        self.write_share = written / trips if trips > 0 else 0.0
        self.tail_writes = 0.0 if trips > 0 else written
        self.l2_bytes = 0.0
        self.pipe_busy = dict.fromkeys((*CUDA_PIPES, "issue"), 0.0)
        trip = work.trip
        self.trip_tensor = tensor_cycles(trip, r)
        self.trip_cuda = cuda_cycles(trip, r)
        if trip.latency_ns is not None:
            self.first_latency = self.steady_latency = trip.latency_ns * 1e-9 * r.clock_hz
        else:
            self.first_latency = r.dram_latency if self.miss > 0 else r.l2_latency
            self.steady_latency = r.l2_latency + self.miss * max(0.0, r.dram_latency - r.l2_latency)

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
        w = self.work
        prologue = b.repeat * w.setup_ns * 1e-9 * self.r.clock_hz + (b.repeat - 1) * self.first_latency
        if prologue > 0:
            yield self.env.timeout(prologue)
        free = simpy.Container(self.env, capacity=self.stages, init=self.stages)
        first = [self.env.event() for _ in range(b.iters)]
        landed = [self.env.event() for _ in range(b.iters)]
        # the bundle's SMs' ports take its trips' loads one after another
        lock = simpy.Resource(self.env, 1)
        self.env.process(self._loader(b, free, first, landed, lock))
        for i in range(b.iters):
            yield first[i]
            yield from self._compute(b, b.trip_scale(i), landed[i])
            yield free.put(1)
        yield from self._epilogue(b)
        yield self.slots.put(b.count)

    def _loader(self, b: Bundle, free: simpy.Container, first: list[simpy.Event],
                landed: list[simpy.Event], lock: simpy.Resource) -> Proc:
        for i in range(len(landed)):
            yield free.get(1)
            self.env.process(self._load(b, i, first[i], landed[i], lock))

    def _load(self, b: Bundle, i: int, first: simpy.Event, landed: simpy.Event,
              lock: simpy.Resource) -> Proc:
        """Move trip i's bytes; `landed` fires (with its time) when all of them are in. A macro-trip
        of g trips also fires `first` when its first trip's share would be in, so its compute
        starts then and ends no earlier than `landed` plus one trip's compute (the pipelined
        T max(L, C) + min(L, C) inside the macro-trip)."""
        t, r = self.work.trip, self.r
        scale = b.trip_scale(i)
        per_cta = (t.load_bytes + t.store_bytes) * scale
        total = b.count * t.load_bytes * scale
        served = b.count * ((t.load_bytes if t.l2_bytes is None else t.l2_bytes) + t.edge_bytes) * scale
        stored = b.count * t.store_bytes * scale
        self.l2_bytes += served + stored
        kept = stored * self.work.l2_kept_stores  # the stores the chip's L2 takes (Ada)
        request = lock.request()
        yield request
        start = self.env.now
        port = self._per_sm(b) * per_cta / port_rate(t, r)
        latency = self.first_latency if i == 0 else self.steady_latency
        if scale > 1:
            self.env.process(self._first_share(first, port / scale, latency, t.overlap_latency))
        # HBM (the misses) and the bundle's SMs' L2 ports (every byte) work at the same time.
        moves = [self.env.process(self.dram.transfer(total * self.miss,
                                                     b.count * self.write_share * scale)),
                 self.env.process(self.port.hold(min(b.count, r.sms), port))]
        if self.l2 is not None:
            moves.append(self.env.process(self.l2.transfer(served, kept)))
        yield self.env.all_of(moves)
        lock.release(request)
        elapsed = self.env.now - start
        if t.overlap_latency:  # dependent round trips: each of the g trips waits its latency
            wait = max(0.0, scale * latency - elapsed)
        else:  # g pipelined trips, `stages` in flight: issued lat/stages apart at the most
            wait = max(0.0, (scale - 1) * latency / self.stages - elapsed) + latency
        if wait > 0:
            yield self.env.timeout(wait)
        landed.succeed(self.env.now)
        if scale == 1:
            first.succeed()

    def _first_share(self, first: simpy.Event, port: float, latency: float,
                     overlap: bool) -> Proc:
        yield self.env.timeout(max(port, latency) if overlap else port + latency)
        first.succeed()

    def _compute(self, b: Bundle, scale: float, landed: simpy.Event) -> Proc:
        t, r, n = self.work.trip, self.r, self._per_sm(b)
        k = min(b.count, r.sms)
        tc = n * self.trip_tensor * scale
        cc = n * self.trip_cuda * scale
        if cc > 0:
            for name in self.pipe_busy:
                ops = t.pipes.get(name, 0.0) if name != "issue" else t.pipes.get(
                    "issue", sum(t.pipes.get(p, 0.0) for p in CUDA_PIPES))
                self.pipe_busy[name] += b.count * ops * scale / r.pipes[name]
        if t.serial or tc == 0 or cc == 0:
            yield from self.tensor.hold(k, tc)
            yield from self.cuda.hold(k, cc)
        else:
            yield self.env.all_of([self.env.process(self.tensor.hold(k, tc)),
                                   self.env.process(self.cuda.hold(k, cc))])
        if scale > 1:  # the macro-trip's last trip computes after its data is in
            if not landed.triggered:
                yield landed
            one = (tc + cc if t.serial else max(tc, cc)) / scale
            tail = landed.value + one - self.env.now
            if tail > 0:
                yield self.env.timeout(tail)
        if t.overhead_cycles > 0:
            yield self.env.timeout(t.overhead_cycles * scale)

    def _epilogue(self, b: Bundle) -> Proc:
        e, r = self.work.epilogue, self.r
        port = port_rate(self.work.trip, r)  # a TMA kernel stores by TMA, a thread-load one by threads
        ctas = b.count * b.repeat
        per_sm = self._per_sm(b) * b.repeat
        k = min(b.count, r.sms)
        if e.ws_bytes > 0:
            self.l2_bytes += ctas * e.ws_bytes
            yield from self.port.hold(k, per_sm * e.ws_bytes / port)
        if e.sync:
            yield self.env.timeout(2 * r.l2_latency)
        if e.reduce_ops > 0:
            yield from self.cuda.hold(min(b.count, r.sms), per_sm * e.reduce_ops / r.pipes["fp32"])
        if e.write_bytes > 0:
            yield from self.port.hold(k, per_sm * e.write_bytes / port)
            kept = ctas * e.write_bytes * self.work.l2_kept_stores
            if self.l2 is not None and kept > 0:  # posted into the chip's L2 (drained by the end)
                self.env.process(self.l2.transfer(0.0, kept))
        if e.latency_ns > 0:
            yield self.env.timeout(per_sm * e.latency_ns * 1e-9 * r.clock_hz)
        self.l2_bytes += ctas * e.write_bytes
        if self.tail_writes > 0:  # posted: they occupy HBM but the CTA does not wait for them
            self.env.process(self.dram.transfer(0.0, self.tail_writes * b.count / self.work.total_ctas))

    def busy(self, cycles: float) -> dict[str, float]:
        """Busy fraction of each unit over the kernel body (what picks the bound)."""
        l2 = self.l2_bytes / (self.r.l2_Bpc * cycles) if cycles else 0.0
        return {"dram": self.dram.busy_fraction(cycles), "l2": l2,
                "tensor": self.tensor.busy_fraction(cycles), "cuda": self.cuda.busy_fraction(cycles)}

    def utilization(self, cycles: float) -> dict[str, float]:
        """Share of each unit's peak used over the kernel body (DRAM against its peak, not achievable)."""
        r = self.r
        if not cycles:
            return {"dram": 0.0, "l2": 0.0, "tensor": 0.0, "cuda": 0.0}
        return {"dram": self.dram.bytes / (r.dram_peak_Bpc * cycles),
                "l2": self.l2_bytes / (r.l2_Bpc * cycles),
                "tensor": self.tensor.busy_fraction(cycles), "cuda": self.cuda.busy_fraction(cycles)}
