"""A weight-only (16-bit activations x packed int4/int8 weights) tiled GEMM as CTA work.

One CTA owns a WT x TT output tile (WT weight rows, TT tokens) and walks K in trips of BK. Per trip
it loads WT x BK packed weights (+ their group scales) and TT x BK activations through its L2 port,
converts the weights to fp16 in registers (`Converter` ops per weight, counted from the library's
converter) and runs 2 TT WT BK FLOPs on the tensor cores, overlapped with the next trip's convert.
The converting threads walk a dependent chain each trip (shared-memory load, convert, MMA issue,
wait): with few warps per scheduler that chain, not the issue rate, sets the trip time, so a trip
costs at least `chain_cycles` = weights per converting thread x ops per weight x `cpi` + `mma_wait`
+ `mma_token_cycles` x TT cycles (`cpi`: cycles per dependent instruction of one warp; the MMA of
a wider token tile takes longer to issue and retire; the constants are each library's).
Schedules (mpsim/library/wo_tiled.py): data-parallel, persistent, stream-K, split-K.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from mpsim.kernels.launch_config import cdiv
from mpsim.library.wo_tiled import SCHED_DP, SCHED_PERSISTENT, SCHED_SPLIT_K, SCHED_STREAM_K
from mpsim.sim.gpu.memory import residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

FP32 = 4


@dataclass(frozen=True)
class Converter:
    """A library's in-register int4/int8 -> fp16 convert, counted from its source (not fitted)."""

    name: str
    alu_per_w4: float          # integer-pipe lane-ops per int4 weight (shift, lop3, prmt)
    fma_per_w4: float          # fp16x2 lane-ops per int4 weight (magic-number sub/fma, scale mul)
    alu_per_w8: float
    fma_per_w8: float
    lds_per_word: float        # shared-memory loads per 32-bit word of packed weights
    # threads converting 64 weight rows (wgmma kernels: one consumer warpgroup); 0: every thread
    # of the CTA converts (mma.sync kernels: Marlin, TurboMind)
    convert_threads_per_64: int = 128


@dataclass(frozen=True)
class WoLoop:
    """A library's main-loop latencies (a room's params: fitted or labelled assumptions)."""

    cpi: float = 8.5                # cycles per dependent instruction of one converting warp
    mma_wait_cycles: float = 118.0  # per trip: MMA issue-to-wait and the pipeline's barriers
    mma_token_cycles: float = 2.0   # per trip and token of the tile: the MMA's issue grows with N
    tile_ns: float = 2500.0         # per output tile: prologue, epilogue not hidden
    fixup_ns: float = 1121.0        # one turnstile step of a split tile: wait, add the partial, signal
    fixed_ns: float = 0.0           # per launch beyond the kernel floor
    mma_eta: float = 1.0            # share of the dense tensor rate its MMA instructions reach


def ops_per_weight(spec: Converter, bits: int) -> tuple[float, float, float]:
    """(alu, fma, lsu) lane-ops per weight at `bits`."""
    alu, fma = (spec.alu_per_w4, spec.fma_per_w4) if bits == 4 else (spec.alu_per_w8, spec.fma_per_w8)
    return alu, fma, spec.lds_per_word * bits / 32


def wo_tiled_work(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, spec: Converter,
                  loop: WoLoop, resident: float) -> LaunchWork:
    m, n, k, bits = int(row["m"]), int(row["n"]), int(row["k"]), int(row["w_bits"])
    group = int(row.get("group_size") or k)
    tt, wt, bk = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"])
    stages, sched, splits = int(cfg["num_stages"]), int(cfg["sched"]), int(cfg.get("split_k", 1))
    tiles = cdiv(m, tt) * cdiv(n, wt)
    trips = cdiv(k, bk)
    w_trip = wt * bk
    alu, fma, lsu = ops_per_weight(spec, bits)
    threads = spec.convert_threads_per_64 * max(1, wt // 64) if spec.convert_threads_per_64 \
        else 32 * int(cfg["num_warps"])
    chain = w_trip / threads * (alu + fma + lsu) * loop.cpi + loop.mma_wait_cycles \
        + loop.mma_token_cycles * tt
    lanes = w_trip * (alu + fma + lsu)
    scale_bytes = wt * FP16 * max(1.0, bk / group)
    trip = Trip(load_bytes=w_trip * bits / 8 + scale_bytes + tt * bk * FP16,
                mma_flops=2.0 * tt * wt * bk, serial=False, mma_eta=loop.mma_eta,
                smem_bytes=(wt / 64) * tt * bk * FP16 + w_trip * bits / 8,
                pipes={"alu": w_trip * alu, "fp32": w_trip * fma, "lsu": w_trip * lsu,
                       "issue": max(lanes, chain * r.pipes["issue"])})
    w_bytes = n * k * bits / 8 + n * cdiv(k, group) * FP16
    reads = w_bytes + m * k * FP16 - residency_credit(resident, m * k * FP16)
    res = CtaResources(threads // 32 + 4, trip.load_bytes, 0.0, stages, 168)
    tile_out = tt * wt * FP16
    ctas, per, tiles_per, split, peers = _schedule(sched, tiles, trips, splits, r.sms)
    # a split tile's CTAs each write an fp32 partial; the one that finishes it reads the others'
    # back (serial reduction): s partials through the finishing CTA's port, s CTAs per tile; the
    # peers add theirs in turn (split_peers): peers - 1 fix-ups
    parts = max(2, cdiv(ctas, tiles)) if split else 0
    epi = Epilogue(tiles_per * tile_out, ws_bytes=parts * tt * wt * FP32,
                   latency_ns=tiles_per * loop.tile_ns + (peers - 1 if split else 0) * loop.fixup_ns)
    work = KernelWork(trip, epi, (per,), "single", ctas, ctas, res, reads,
                      dram_write_bytes=float(m * n * FP16), fixed_ns=loop.fixed_ns, name=spec.name)
    return [KernelPart(work, Occupancy(1, stages, False, "kernel"))]


SK_MIN_ITERS = 8  # CUTLASS tile_scheduler_params.h: min_iters_per_sk_unit_


class Schedule(NamedTuple):
    """How a schedule deals a weight-only GEMM's tiles over CTAs."""

    ctas: int
    per: int          # trips of the busiest CTA
    tiles_per: int    # tiles it finishes
    split: bool       # whether tiles are split over CTAs
    peers: int = 1    # CTAs that share one split tile (split_peers)


def _schedule(sched: int, tiles: int, trips: int, splits: int, sms: int) -> Schedule:
    if sched == SCHED_DP:
        return Schedule(tiles, trips, 1, False)
    if sched == SCHED_PERSISTENT:
        ctas = min(tiles, sms)
        return Schedule(ctas, cdiv(tiles, ctas) * trips, cdiv(tiles, ctas), False)
    if sched == SCHED_STREAM_K:
        return _stream_k(tiles, trips, sms)
    if sched == SCHED_SPLIT_K:
        return Schedule(tiles * splits, cdiv(trips, splits), 1, splits > 1, splits)
    raise ValueError(f"unknown weight-only GEMM schedule {sched}")


def split_peers(sched: int, tiles: int, trips: int, splits: int, sms: int) -> int:
    """CTAs that share one split tile. Both reductions are a turnstile: CUTLASS 3's stream-K in its
    default Deterministic reduction mode (sm90_tile_scheduler_stream_k.hpp `fixup`: each peer but
    the first waits until the tile's lock equals its K index, `wait_eq`, then adds its partial) and
    CUTLASS 2's serial split-K (a semaphore per tile, waited on in K-partition order); Marlin's
    slices of a column take its lock in slice order too (barrier_acquire(&locks[slice_col],
    slice_idx)). So a tile finishes (peers - 1) fix-ups after its peers' main loops: `fixup_ns` is
    one step (wait for the lock, add the partial, signal)."""
    return _schedule(sched, tiles, trips, splits, sms).peers


def _stream_k(tiles: int, trips: int, sms: int) -> Schedule:
    """CUTLASS sm90 StreamKScheduler, Heuristic mode (tile_scheduler_params.h get_num_sk_tiles,
    get_num_sk_units): data-parallel when the tiles fill whole waves, a tile has <= 8 K trips, or
    the tail wave is at least half full; else the last two waves' tiles (one when there is no full
    wave) are stream-K, their trips dealt over min(SMs, trips / 8) units; the rest data-parallel."""
    full, total = tiles // sms, cdiv(tiles, sms)
    tail = tiles - full * sms
    if full == total or trips <= SK_MIN_ITERS or 2 * tail >= sms:
        ctas = min(tiles, sms)
        return Schedule(ctas, cdiv(tiles, ctas) * trips, cdiv(tiles, ctas), False)
    dp_waves = full - 1 if full > 1 else 0
    sk_tiles = tiles - dp_waves * sms
    units = max(1, min(sms, sk_tiles * trips // SK_MIN_ITERS))
    per = dp_waves * trips + cdiv(sk_tiles * trips, units)
    return Schedule(max(units, min(tiles, sms)), per, dp_waves + cdiv(sk_tiles, units), True,
                    max(1, cdiv(units, sk_tiles)))
