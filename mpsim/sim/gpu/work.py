"""A launch as CTA work, and its coarsening into bundles of identical CTAs that run as one process.

`KernelWork` says what one CTA does per K-loop trip (bytes loaded through L2, tensor FLOPs, CUDA-core
work by issue pipe) and around its loop (a prologue, the first tile's latency, an epilogue per output
tile, bytes written), how many trips each CTA class makes, and how classes are laid out over the
linear CTA index (the block scheduler dispatches in that order). A launch is one or more such kernels
run back to back (`LaunchWork`: e.g. a framework's KV append, then its attention kernel).

Coarsening (docs/simulator.md#speed): CTAs are dispatched in waves of `slots` (SMs x CTAs per SM);
inside a wave, CTAs of one class are identical, so they become `Bundle` processes with aggregated
demand; co-resident CTAs of a wave (more than one per SM) are split into up to `max_resident_split`
bundles so that one's loads overlap another's compute. Identical consecutive waves beyond
`max_waves` merge into one bundle whose CTAs make the merged waves' trips back to back; more than
`max_classes` classes merge neighbours (mean trips, rounded up); more than `gpu_max_iters` trips
become macro-trips: the first and the last trip stay single (so the pipeline's fill and drain are
exact) and the ones between are simulated in groups with g times the demand and g times the
per-trip latency (bytes in flight / latency is kept).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates, tensor_rate

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

CUDA_PIPES = ("fp32", "alu", "cvt", "sfu", "lsu")


@dataclass(frozen=True)
class Trip:
    """What one CTA does in one K-loop trip."""

    load_bytes: float                  # through L2 (hits and misses)
    mma_flops: float                   # tensor cores, padded to the MMA shape
    pipes: Mapping[str, float] = field(default_factory=dict)  # CUDA-core lanes by pipe; "issue"
    serial: bool = True                # tensor then CUDA cores (or overlapped: dequant + MMA)
    mma_dtype: str = "fp16"            # tensor rate: fp16/bf16, or fp8 (attention on fp8 KV)
    mma_eta: float = 1.0               # share of the tensor rate the kernel's main loop reaches
    smem_bytes: float = 0.0            # shared-memory operand reads the MMAs need
    latency_ns: float | None = None    # a fixed per-trip round trip (latency-bound loops), else
    #                                    the memory model's (first tile, then miss-weighted)
    overlap_latency: bool = False      # latency and transfer overlap (many requests in flight)
    overhead_cycles: float = 0.0       # per trip, not hidden (loop control of kernels without SASS)
    l2_bytes: float | None = None      # of load_bytes, what the chip's L2 serves (None: all of it);
    #                                    less where the port's count holds loads never issued
    bulk: bool = False                 # loads (and the kernel's stores) are TMA bulk copies
    #                                    (GpuRates.port_Bpc: Blackwell's wider port), else issued by
    #                                    threads (LDG, cp.async: thread_port_Bpc)
    edge_bytes: float = 0.0            # the chip's L2 load of TMA box rows beyond the tensor's
    #                                    edge (zero-filled, no data read, no port time)
    store_bytes: float = 0.0           # output stored through the port with the trip's loads (a
    #                                    persistent CTA's tiles finish inside its loop), not read


def cuda_cycles(trip: Trip, r: GpuRates) -> float:
    """Cycles one CTA's trip keeps the SM's CUDA-core pipes busy (concurrent pipes, one issue port)."""
    if not trip.pipes:
        return 0.0
    per_pipe = [trip.pipes.get(name, 0.0) / r.pipes[name] for name in CUDA_PIPES]
    issue = trip.pipes.get("issue", sum(trip.pipes.get(n, 0.0) for n in CUDA_PIPES))
    return max(*per_pipe, issue / r.pipes["issue"])


def tensor_cycles(trip: Trip, r: GpuRates) -> float:
    """Cycles one CTA's trip keeps the SM's tensor pipe busy (MMA rate, or the operands' smem)."""
    if trip.mma_flops <= 0:
        return 0.0
    mma = trip.mma_flops / (tensor_rate(r, trip.mma_dtype) * trip.mma_eta)
    return max(mma, trip.smem_bytes / r.smem_Bpc)


@dataclass(frozen=True)
class Epilogue:
    """What one CTA does after its K-loop (averaged over the CTAs of the launch)."""

    write_bytes: float                 # output, through the SM's port and L2 to DRAM
    ws_bytes: float = 0.0              # split partials written and read back in L2
    reduce_ops: float = 0.0            # fp32 lane-ops of the reduction
    sync: bool = False                 # an atomic handshake between the splits (two L2 round trips)
    latency_ns: float = 0.0            # per CTA, not overlapped (epilogue of a tile, fix-up)


@dataclass(frozen=True)
class KernelWork:
    trip: Trip
    epilogue: Epilogue
    iters_by_class: tuple[int, ...]
    layout: str            # "single", "inner" (class = pid % classes), "outer" (class = pid // inner)
    inner: int             # CTAs per class for "outer" (so classes x inner == total_ctas)
    total_ctas: int
    resources: CtaResources
    dram_read_bytes: float  # DRAM reads of the whole launch after L2 reuse and residency
    setup_ns: float = 0.0   # per CTA before its loop (prologue: Q tile, metadata)
    fixed_ns: float = 0.0   # per launch, outside the CTAs (a combine, a fix-up, the op's scope)
    resident_split: int = 0  # co-resident CTAs of a wave as this many processes (0: the default)
    dram_write_bytes: float | None = None  # the launch's HBM writes (None: epilogue x CTAs)
    l2_kept_stores: float = 0.0  # share of its stores that stay in L2 (a replayed output), which
    #                              take the chip's L2 at its write rate where it is a server (Ada)
    name: str = ""

    def class_of_range(self, start: int, stop: int) -> Counter[int]:
        """How many CTAs of each class have linear ids in [start, stop)."""
        n = len(self.iters_by_class)
        if self.layout == "single" or n == 1:
            return Counter({0: stop - start})
        if self.layout == "inner":
            out: Counter[int] = Counter()
            full = (stop - start) // n
            for c in range(n):
                out[c] += full
            for pid in range(start + full * n, stop):
                out[pid % n] += 1
            return out
        out = Counter()
        for c in range(start // self.inner, (stop - 1) // self.inner + 1):
            lo, hi = max(start, c * self.inner), min(stop, (c + 1) * self.inner)
            out[c] += hi - lo
        return out

    @property
    def tile_read_bytes(self) -> float:
        per_class = self.class_of_range(0, self.total_ctas)
        return sum(cnt * self.iters_by_class[c] * self.trip.load_bytes for c, cnt in per_class.items())

    @property
    def cta_trips(self) -> int:
        per_class = self.class_of_range(0, self.total_ctas)
        return sum(cnt * self.iters_by_class[c] for c, cnt in per_class.items())

    @property
    def written_bytes(self) -> float:
        if self.dram_write_bytes is not None:
            return self.dram_write_bytes
        return self.epilogue.write_bytes * self.total_ctas

    @property
    def miss_ratio(self) -> float:
        total = self.tile_read_bytes
        return min(1.0, self.dram_read_bytes / total) if total > 0 else 0.0

    @property
    def mma_flops(self) -> float:
        per_class = self.class_of_range(0, self.total_ctas)
        return sum(cnt * self.iters_by_class[c] * self.trip.mma_flops for c, cnt in per_class.items())


@dataclass(frozen=True)
class KernelPart:
    """One kernel of a launch with the occupancy it runs at."""

    work: KernelWork
    occupancy: Occupancy


LaunchWork = list[KernelPart]


@dataclass(frozen=True)
class Bundle:
    count: int             # CTAs running together
    trips: int             # real trips each CTA makes (merged waves included)
    iters: int             # trips simulated
    scale: float           # real trips per simulated middle trip (first and last are single)
    repeat: int            # waves merged into this bundle (prologue and epilogue multiplier)

    def trip_scale(self, i: int) -> float:
        if self.iters == self.trips:
            return 1.0
        return 1.0 if i in (0, self.iters - 1) else self.scale


def bundles(work: KernelWork, slots: int, sms: int, p: SimParams) -> list[Bundle]:
    """The bundle processes of a launch, in dispatch order."""
    waves = [work.class_of_range(s, min(s + slots, work.total_ctas))
             for s in range(0, work.total_ctas, slots)]
    out: list[Bundle] = []
    for counts, repeat in _merge_waves(waves, p.max_waves):
        for count, iters in _merge_classes(counts, work.iters_by_class, p.max_classes):
            for part in _resident_parts(count, sms, work.resident_split or p.max_resident_split):
                out.append(_coarsen(part, iters * repeat, repeat, p.gpu_max_iters))
    return out


def _resident_parts(count: int, sms: int, cap: int) -> list[int]:
    """A wave's `count` CTAs of one class as up to `cap` processes of whole CTAs-per-SM: r = ceil(count
    / SMs) co-resident CTAs per SM are dealt r_j per process (sum r_j = r), each process holding
    r_j x SMs CTAs (the last one the remainder), so every SM keeps its real share."""
    per_sm = max(1, math.ceil(count / sms))
    split = min(cap, per_sm)
    parts, left = [], count
    for j in range(split):
        r_j = per_sm // split + (1 if j < per_sm % split else 0)
        take = min(left, r_j * sms) if j < split - 1 else left
        if take > 0:
            parts.append(take)
        left -= take
    return parts


def _merge_waves(waves: list[Counter[int]], max_waves: int) -> list[tuple[Counter[int], int]]:
    runs: list[tuple[Counter[int], int]] = []
    for w in waves:
        if runs and runs[-1][0] == w:
            runs[-1] = (w, runs[-1][1] + 1)
        else:
            runs.append((w, 1))
    out = []
    for counts, n in runs:
        per = math.ceil(n / max_waves)  # waves per merged bundle
        out += [(counts, min(per, n - i)) for i in range(0, n, per)]
    return out


def _merge_classes(counts: Counter[int], iters: tuple[int, ...], cap: int) -> list[tuple[int, int]]:
    """(count, trips) per bundle of one wave: classes with equal trips first, then neighbours."""
    by_trips: dict[int, int] = {}
    for c in sorted(counts):
        if counts[c] > 0 and iters[c] > 0:
            by_trips[iters[c]] = by_trips.get(iters[c], 0) + counts[c]
    present = list(by_trips.items())
    per = math.ceil(len(present) / cap) if present else 1
    out = []
    for i in range(0, len(present), per):
        group = present[i:i + per]
        count = sum(n for _, n in group)
        out.append((count, math.ceil(sum(n * t for t, n in group) / count)))
    return out


def _coarsen(count: int, trips: int, repeat: int, max_iters: int) -> Bundle:
    if trips <= max_iters:
        return Bundle(count, trips, trips, 1.0, repeat)
    middle = max_iters - 2
    return Bundle(count, trips, max_iters, (trips - 2) / middle, repeat)
