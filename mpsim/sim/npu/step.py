"""A whole step (a decode pass, or the prefill) on the NPU as one SimPy run over its operators.

Three processes share the chip (docs/npu.md has the drawing):
- the command processor dispatches operators in order, each while the previous one runs (the queue
  holds one command beyond the running one), `dispatch.overhead_us` each;
- the DMA engines run ahead through the step's independent operands (weights, scales, LUTs, the KV
  cache of earlier tokens) in SRAM-sized chunks, as far as the weight SRAM of all cores allows;
  a chunk is in SRAM one DRAM latency plus the descriptor setup after its transfer;
- the cores execute operators in order: wait for the dispatch, read the activations the previous
  operators did not leave in SRAM, then consume the prefetched chunks (decoder, matrix unit, SRAM
  ports and vector unit as one pipeline at the pace of the slowest, kernel_model.py), free their
  SRAM, drain the array, and post the writes.
With fusion on (the hardware file's `compiler.fusion`) norms, RoPE, activations and residual adds run
inside their neighbouring GEMM or attention (fusion.py). DRAM is one pipe at the achievable bandwidth
(or the DMA engines' rate, if lower); activation reads and posted writes interleave with the
prefetch stream and delay it by their bytes (bandwidth is conserved).

Per launch it reports its end (compute done; the step's last launch also waits for the writes),
its busy interval (first DMA of its operands to its last write), the exposed dispatch, bytes,
unit utilizations over the busy interval, the bound, and its dynamic energy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import simpy

from mpsim.hw_models.schema import NpuEnergy
from mpsim.sim.energy import npu_dynamic_j
from mpsim.sim.npu.fusion import fuse
from mpsim.sim.npu.kernel_model import UNITS, OpWork
from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.params import SimParams
from mpsim.sim.units import Proc

STEP_UTILS = ("dram", "dma", *UNITS)
PART_NAMES = ("part_memory", "part_math", "part_issue")  # the NPU has no fixed part (docs)
FLOAT_COLUMNS = ("end", "busy_start", "busy_end", "overhead", "bytes_dram", "bytes_sram",
                 "energy_dyn", *(f"util_{u}" for u in STEP_UTILS), *PART_NAMES)
# The time parts of the unit that paces an operator's stream (docs/simulator.md#time-parts): the
# matrix unit is math, the weight decoder (dequantization) and the vector unit issue, SRAM memory.
PACE_PART = {"mac": "part_math", "decoder": "part_issue", "vector": "part_issue",
             "sram": "part_memory"}


@dataclass
class _Item:
    """One dispatched operator and the operators fused into it."""

    host: int
    members: list[int]
    work: OpWork
    chunks: list[float]
    vector: float  # vector-unit cycles of the host and its members

    @property
    def stream_bytes(self) -> float:
        return sum(self.chunks)


@dataclass
class StepOutcome:
    """Per launch of the step, in step order; times in seconds from the step's start."""

    columns: dict[str, np.ndarray]
    bound: list[str]
    duration_s: float = field(default=0.0)

    def as_dict(self) -> dict[str, object]:
        return {"columns": {k: v.tolist() for k, v in self.columns.items()}, "bound": self.bound,
                "duration_s": self.duration_s}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> StepOutcome:
        cols = d["columns"]
        assert isinstance(cols, dict)
        bound, duration = d["bound"], d["duration_s"]
        assert isinstance(bound, list) and isinstance(duration, float | int)
        return cls({k: np.asarray(v, dtype=float) for k, v in cols.items()}, [str(b) for b in bound],
                   float(duration))


def chunks_of(nbytes: float, r: NpuRates, p: SimParams) -> list[float]:
    """The prefetch of one operator as DMA chunks: at least `npu_min_chunks` (so an operator's own
    compute overlaps its stream) of at most 1/`npu_window_chunks` of the run-ahead window, but no
    more than `npu_max_chunks` (a longer stream's chunks stand for several window-sized ones and
    occupy one window share: `occupancy`), then one DMA tile per core last (the compute after the
    last chunk lands is the only part of a stream not hidden behind it)."""
    if nbytes <= 0:
        return []
    total = math.ceil(nbytes)  # whole bytes: the SRAM window's level stays exact
    pool = r.cores * r.wbuf_bytes
    tile = min(p.npu_tile_bytes * r.cores, int(pool // 4))
    if total <= tile:
        return [float(total)]
    body = total - tile
    n = max(math.ceil(body / (pool / p.npu_window_chunks)),
            min(p.npu_min_chunks, math.ceil(body / tile)))
    n = min(n, p.npu_max_chunks)  # beyond it a chunk stands for several window-sized ones
    q, rem = divmod(body, n)
    return [float(q + 1)] * rem + [float(q)] * (n - rem) + [float(tile)]


def occupancy(nbytes: float, r: NpuRates, p: SimParams) -> float:
    """SRAM a chunk holds while in flight: its bytes, at most one window share."""
    return float(min(nbytes, (r.cores * r.wbuf_bytes) // p.npu_window_chunks))


def plan_items(works: Sequence[OpWork], r: NpuRates, p: SimParams) -> tuple[list[_Item], list[int]]:
    """Dispatched items after fusion, and the item index of every launch."""
    owner = fuse([w.op for w in works], r.fusion)
    items: list[_Item] = []
    where: dict[int, int] = {}
    for i, w in enumerate(works):
        if owner[i] == i:
            where[i] = len(items)
            items.append(_Item(i, [], w, chunks_of(w.prefetch_bytes, r, p),
                               w.unit_cycles.get("vector", 0.0)))
    item_of = []
    for i, w in enumerate(works):
        k = where[owner[i]]
        item_of.append(k)
        if owner[i] != i:
            item = items[k]
            item.members.append(i)
            item.vector += w.unit_cycles.get("vector", 0.0)
    return items, item_of


class StepSim:
    def __init__(self, r: NpuRates, p: SimParams, items: list[_Item], isolated: bool = False) -> None:
        self.env = simpy.Environment()
        self.r, self.p, self.items, self.isolated = r, p, items, isolated
        n = len(items)
        self.pipe_Bpc = min(r.dram_Bpc, r.dma_Bpc)
        pool = r.cores * r.wbuf_bytes
        self.pool = simpy.Container(self.env, capacity=pool, init=pool)
        self.landed = [[self.env.event() for _ in it.chunks] for it in items]
        self.dispatched = [self.env.event() for _ in range(n)]
        self.started = [self.env.event() for _ in range(n)]
        self.dispatch_cycles = r.overhead_s * r.clock_hz
        self.stolen = 0.0  # bytes of activation reads and writes the prefetch stream still owes
        self.first_dma = np.full(n, np.inf)
        self.exec_start = np.zeros(n)
        self.end = np.zeros(n)
        self.write_end = np.zeros(n)
        self.wait_dispatch = np.zeros(n)
        self.wait_data = np.zeros(n)
        self.wait_latency = np.zeros(n)  # of wait_data: DRAM round trips (the rest: transfers)
        self.compute = np.zeros(n)
        self.stream = np.zeros(n)  # of compute: the pipeline's stream (the rest: fill and drain)
        self.done = 0

    def run(self) -> float:
        self.env.process(self._dispatcher())
        self.env.process(self._prefetcher())
        self.env.process(self._executor())
        self.env.run()
        if self.done != len(self.items):  # a model bug, never an input error
            raise RuntimeError(f"NPU step stalled after {self.done} of {len(self.items)} operators")
        return float(self.env.now)

    def _stream_cycles(self, item: _Item) -> float:
        units = dict(item.work.unit_cycles)
        units["vector"] = item.vector
        return max(units.values()) if units else 0.0

    def _dispatcher(self) -> Proc:
        for i in range(len(self.items)):
            if i > 0:
                yield self.started[i - 1]
            if self.dispatch_cycles > 0:
                yield self.env.timeout(self.dispatch_cycles)
            self.dispatched[i].succeed()

    def _prefetcher(self) -> Proc:
        latency = self.r.dram_latency + self.r.dma_setup
        for i, item in enumerate(self.items):
            if self.isolated:
                yield self.dispatched[i]
            for c, nbytes in enumerate(item.chunks):
                yield self.pool.get(occupancy(nbytes, self.r, self.p))
                self.first_dma[i] = min(self.first_dma[i], self.env.now)
                owed, self.stolen = self.stolen, 0.0
                yield self.env.timeout((nbytes + owed) / self.pipe_Bpc)
                event = self.landed[i][c]
                self.env.timeout(latency).callbacks.append(lambda _, ev=event: ev.succeed())

    def _small_transfer(self, nbytes: float) -> float:
        """An activation read or a write: it interleaves with the prefetch stream, which pays for it."""
        self.stolen += nbytes
        return nbytes / self.pipe_Bpc

    def _executor(self) -> Proc:
        env, latency = self.env, self.r.dram_latency + self.r.dma_setup
        prev_end = 0.0
        for i, item in enumerate(self.items):
            yield self.dispatched[i]
            self.wait_dispatch[i] = env.now - prev_end
            self.exec_start[i] = env.now
            self.started[i].succeed()
            w = item.work
            if w.dep_bytes > 0:
                t = env.now
                yield env.timeout(self._small_transfer(w.dep_bytes) + latency)
                self.wait_data[i] += env.now - t
                self.wait_latency[i] += latency
            stream, total = self._stream_cycles(item), item.stream_bytes
            if not item.chunks and stream > 0:
                yield env.timeout(stream)
                self.compute[i] += stream
                self.stream[i] += stream
            for c, nbytes in enumerate(item.chunks):
                t = env.now
                yield self.landed[i][c]
                self.wait_data[i] += env.now - t
                if c == 0:  # the first chunk's wait is its round trip first
                    self.wait_latency[i] += min(env.now - t, latency)
                cycles = stream * nbytes / total
                if cycles > 0:
                    yield env.timeout(cycles)
                self.compute[i] += cycles
                self.stream[i] += cycles
                yield self.pool.put(occupancy(nbytes, self.r, self.p))
            if w.tail_cycles > 0:
                yield env.timeout(w.tail_cycles)
                self.compute[i] += w.tail_cycles
            self.end[i] = prev_end = env.now
            self.write_end[i] = env.now + self._small_transfer(w.write_bytes)
            self.done += 1

    def bound(self, k: int, share: float, dram_bytes: float) -> str:
        """What set the item's share of the step: 'launch' when it waited for its dispatch half the
        share, else the busiest of its units and of the DMA pipe (its bytes at the pipe's rate:
        'dram', or 'dma' if the engines are slower) when that busy time is at least half the
        share (a prefetched stream can exceed it), else 'latency'."""
        if share <= 0:
            return "latency"
        if self.wait_dispatch[k] >= 0.5 * share:
            return "launch"
        units = dict(self.items[k].work.unit_cycles)
        units["vector"] = self.items[k].vector
        units["dram" if self.r.dram_Bpc <= self.r.dma_Bpc else "dma"] = dram_bytes / self.pipe_Bpc
        unit = max(units, key=lambda u: (units[u], u))
        return unit if units[unit] >= 0.5 * share else "latency"

    def parts(self, k: int) -> dict[str, float]:
        """Cycles of the named parts of item k's share (docs/simulator.md#time-parts): waiting for
        its data's transfers is memory, the stream is the part of the unit that paces it; round
        trips, fill and drain are left to latency."""
        units = dict(self.items[k].work.unit_cycles)
        units["vector"] = self.items[k].vector
        out = dict.fromkeys(PART_NAMES, 0.0)
        out["part_memory"] = self.wait_data[k] - self.wait_latency[k]
        if self.stream[k] > 0 and units:
            pace = max(units, key=lambda u: (units[u], u))
            out[PACE_PART[pace]] += self.stream[k]
        return out


def simulate_step(works: Sequence[OpWork], r: NpuRates, p: SimParams, energy: NpuEnergy | None,
                  isolated: bool = False) -> StepOutcome:
    """Run one step's launches (their works, in order) and report every launch."""
    items, item_of = plan_items(works, r, p)
    sim = StepSim(r, p, items, isolated)
    sim.run()
    n = len(works)
    cols = {c: np.zeros(n) for c in FLOAT_COLUMNS}
    bound: list[str] = []
    hz = r.clock_hz
    last = len(items) - 1
    for i, w in enumerate(works):
        k = item_of[i]
        item = items[k]
        fused = item.host != i
        end = sim.end[k]
        if k == last:
            end = max(end, float(sim.write_end.max()))
        if fused and i < item.host:
            end = sim.exec_start[k]  # a prologue: done when its host starts
        start = min(sim.first_dma[k], sim.exec_start[k]) if not fused else sim.exec_start[k]
        busy_end = max(sim.end[k], sim.write_end[k])
        dram = w.write_bytes if fused else w.prefetch_bytes + w.dep_bytes + w.write_bytes
        cols["end"][i] = end / hz
        cols["busy_start"][i] = start / hz
        cols["busy_end"][i] = busy_end / hz
        first = i == min(item.host, *item.members) if item.members else not fused
        cols["overhead"][i] = sim.wait_dispatch[k] / hz if first else 0.0
        cols["bytes_dram"][i] = dram
        cols["bytes_sram"][i] = w.sram_bytes
        cols["energy_dyn"][i] = npu_dynamic_j(energy, dram, w.sram_bytes, w.macs, w.decoded,
                                              w.bits, w.vector_ops)
        span = max(busy_end - start, 1e-9)
        cols["util_dram"][i] = dram / (r.dram_peak_Bpc * span)
        cols["util_dma"][i] = dram / (r.dma_Bpc * span)
        for u in UNITS:
            cols[f"util_{u}"][i] = w.unit_cycles.get(u, 0.0) / span
        share = sim.end[k] - (sim.end[k - 1] if k > 0 else 0.0)
        bound.append("fused" if fused else sim.bound(k, share, dram))
        if not fused:  # the host carries its item's time (its members end with it or before it)
            for name, cyc in sim.parts(k).items():
                cols[name][i] = cyc / hz
    # A prologue ends when its host starts, after the launch before it: keep ends in order.
    cols["end"] = np.maximum.accumulate(cols["end"])
    return StepOutcome(cols, bound, float(cols["end"][-1]) if n else 0.0)
