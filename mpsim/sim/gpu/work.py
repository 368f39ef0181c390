"""A launch as CTA work, and its coarsening into bundles of identical CTAs that run as one process.

`KernelWork` says what one CTA does per K-loop trip (bytes loaded through L2, tensor FLOPs, CUDA-core
ops) and at its end (bytes written, split reduction), how many trips each CTA class makes, and how
classes are laid out over the linear CTA index (the block scheduler dispatches in that order).

Coarsening (docs/simulator.md): CTAs are dispatched in waves of `slots` (SMs x CTAs per SM); inside a
wave, CTAs of one class are identical, so they become one `Bundle` process with aggregated demand.
Identical consecutive waves beyond `max_waves` merge into one bundle whose CTAs make the merged waves'
trips back to back; more than `max_classes` classes merge neighbours (mean trips, rounded up); more
than `max_iters` trips per bundle become macro-trips of g trips each, with g times the demand and
g times the load latency, so Little's law (bytes in flight / latency) is kept.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class Trip:
    """What one CTA does in one K-loop trip."""

    load_bytes: float      # through L2 (hits and misses)
    mma_flops: float       # tensor cores, padded to the MMA shape
    fp_ops: float          # CUDA-core fp32 lane-ops
    int_ops: float         # CUDA-core integer ops (dequantization)
    serial: bool           # tensor then CUDA cores (attention) or overlapped (dequant + MMA)


@dataclass(frozen=True)
class Epilogue:
    """What one CTA does after its K-loop (averaged over the CTAs of the launch)."""

    write_bytes: float     # output, written back to DRAM through L2
    ws_bytes: float = 0.0  # split partials written and read back in L2
    reduce_ops: float = 0.0
    sync: bool = False     # an atomic handshake between the splits (two L2 round trips)


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
    def miss_ratio(self) -> float:
        total = self.tile_read_bytes
        return min(1.0, self.dram_read_bytes / total) if total > 0 else 0.0


@dataclass(frozen=True)
class Bundle:
    count: int             # CTAs running together
    iters: int             # (macro-)trips simulated
    scale: float           # real trips per simulated trip (demand multiplier)
    repeat: int            # waves merged into this bundle (epilogue multiplier)


def bundles(work: KernelWork, slots: int, p: SimParams) -> list[Bundle]:
    """The bundle processes of a launch, in dispatch order."""
    waves = [work.class_of_range(s, min(s + slots, work.total_ctas))
             for s in range(0, work.total_ctas, slots)]
    out: list[Bundle] = []
    for counts, repeat in _merge_waves(waves, p.max_waves):
        for count, iters in _merge_classes(counts, work.iters_by_class, p.max_classes):
            out.append(_coarsen(count, iters * repeat, repeat, p.max_iters))
    return out


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
    g = math.ceil(trips / max_iters)
    sim_iters = math.ceil(trips / g)
    return Bundle(count, sim_iters, trips / sim_iters, repeat)
