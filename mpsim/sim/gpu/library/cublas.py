"""cuBLAS bf16/fp16 GEMM (`cublas_gemm` rows) as CTA work, per GPU generation (name, candidates and
row builder: mpsim/library/cublas.py).

Row: op gemm, w_format fp16 (bf16 is read as fp16); config from `cublas_candidates` /
`cublas_heuristic`: block_m = token tile, block_n = weight tile (of one CTA), block_k, `stream_k`
0/1, `split_k`, `sm` (80 Ampere/Ada, 90 Hopper when absent, 100 Blackwell), `pair` (a 2-SM CTA
pair), and `w_copies` when a measurement replays the weights (analysis/validation/weight_copies.py);
grid = the tiles x K slices, or the persistent CTAs.

cuBLAS runs y = x W^T column-major as W x^T: the weight rows are the MMA M side, the tokens its N
side. A config is a token tile TT, a weight tile WT and a schedule: data-parallel tiles in waves
(Ampere/Ada: also split into K slices, serial split-K), or a persistent stream-K grid (Hopper,
Blackwell: min(units, SMs) CTAs, every (tile, K trip) unit dealt evenly). Hopper and Blackwell
split M evenly over the tiles: tt = ceil(M / ceil(M / TT)) rounded up to the MMA's N granule (8
for wgmma, 16 for tcgen05), so padding costs little and time stays smooth in M, as measured on
H100/H200; Ampere/Ada's mma.sync kernels are compiled per CTA tile and run a partial tile's every
MMA (tokens pad to the CTA tile). Per K trip a CTA loads (tt + WT) x block_k elements through its
L2 port (a 2-SM pair: half the tokens) and runs 2 tt WT block_k FLOPs on the tensor cores, or
longer when the operands' shared-memory reads bound the MMAs (mma.sync: every warp reads its warp
tile's rows; wgmma: each 64-row warpgroup reads its A rows and all of B; tcgen05: each operand
once). Each output tile pays an epilogue not overlapped with its CTA's MMAs (accumulator convert,
smem staging, TMA store) plus its stored bytes (its valid rows: the epilogue is predicated) through
the port; a persistent stream-K CTA runs its tiles' epilogues inside its loop (the producer keeps
loading `stages` ahead meanwhile), and on Blackwell two TMEM accumulators (CUTLASS
sm100_mma_warpspecialized.hpp AccumulatorPipelineStageCount) overlap them with the next tile, so
only a CTA's last one is exposed. A stream-K tile split between P CTAs pays P - 1
fix-ups in turn (each peer waits for the previous one, adds its partial, signals: CUTLASS's
default Deterministic reduction; for cuBLAS's closed kernels an assumption, which the H200 rows
support: priced with one fix-up, stream-K over a few tiles ran 13-27% fast). Ampere/Ada split-K
slices write fp32 partials and reduce in turn (a semaphore, CUTLASS 2's serial split-K); Hopper
split-K slices write them to a workspace and cuBLAS's splitKreduce_kernel, a second kernel, adds
them (`cublas.reduce_ns`, one round trip): the H200 bf16 rows at M <= 16 and N <= 1024 ramp 1.33
ns per K element to about 6 us at K = 2560 and stay there to K = 12288, two kernels' worth of
fixed cost. Blackwell keeps one fix-up a split tile (its B200 rows got worse with the turnstile).
Constants: CublasParams, SimParams.cublas (GEMM rows of H200; applied to every
generation, an assumption until rows of other GPUs refit them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.cublas import KERNELS
from mpsim.sim.gpu.memory import replay_hits, residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4
# tcgen05 MMAs with M 128/256 take N in steps of 16 (CUTLASS sm100_shapes.py, 16-bit dense shapes)
SM100_TOKEN_GRANULE = 16


@dataclass(frozen=True)
class CublasParams:
    """cuBLAS bf16/fp16 GEMM (H200 GEMM rows, applied to every generation); SimParams.cublas
    (`--fit-params cublas.NAME`). tile_ns, sk_fixup_us, reduce_ns refitted at stop 40 on a
    stratified 500-row sample of the H200 vLLM 0.24.0 bf16 GEMM rows (docs/simulator.md's table
    of constants)."""

    tile_ns: float = 387.9               # per output tile: epilogue not overlapped with the next tile
    sk_fixup_us: float = 1.445           # stream-K: one peer's turn (wait, add its partial, signal)
    token_granule: int = 8               # wgmma N granularity of the token side of a tile
    reduce_ns: float = 797.2             # Hopper split-K: splitKreduce_kernel's round trip


def token_tile(m: int, nominal: int, granule: int) -> tuple[int, int]:
    """(token tile used, token tiles): the tiles split M evenly, rounded up to the granule."""
    tiles = cdiv(m, nominal)
    return cdiv(cdiv(m, tiles), granule) * granule, tiles


def sm80_warp_grid(wt: int, tt: int, warps: int) -> tuple[int, int]:
    """(warps along the weight tile, along the token tile) of CUTLASS's SM80 tiles (generator.py
    GenerateSM80_TensorOp_16816 warp counts: [4,2,1] for 256x128, [2,4,1] for 128x256, [4,1,1]
    for 256x64, [1,4,1] for 64x256, [2,2,1] for the rest)."""
    a = 4 if wt == 256 else (1 if tt == 256 and wt == 64 else 2)
    return a, max(1, warps // a)


def cublas_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                p: SimParams, resident: float) -> LaunchWork:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    wt, bk, stages = int(cfg["block_n"]), int(cfg["block_k"]), int(cfg["num_stages"])
    sm, pair, split = int(cfg.get("sm", 90)), bool(cfg.get("pair", 0)), int(cfg.get("split_k", 1))
    if sm == 80:  # mma.sync kernels are compiled per CTA tile: a partial tile runs every MMA
        tt, m_tiles = int(cfg["block_m"]), cdiv(m, int(cfg["block_m"]))
    else:
        granule = p.cublas.token_granule if sm == 90 else SM100_TOKEN_GRANULE
        tt, m_tiles = token_tile(m, int(cfg["block_m"]), granule)
    tiles = m_tiles * cdiv(n, wt)
    trips = cdiv(k, bk)
    tokens_loaded = tt / 2 if pair else tt  # a 2-SM pair: each CTA loads half the token operand
    if sm == 80:  # ldmatrix: every warp reads its warp tile's A and B rows per K step
        a, b = sm80_warp_grid(wt, tt, int(cfg["num_warps"]))
        smem = (b * wt + a * tt) * bk * FP16
    elif sm == 90:  # wgmma: each 64-row warpgroup reads its A rows and the whole B from smem
        smem = (wt / 64) * (bk / 16) * (64 + tt) * 16 * FP16
    else:  # tcgen05: the MMA reads the CTA's A rows and its share of B once
        smem = (wt + tokens_loaded) * bk * FP16
    trip = Trip(load_bytes=(tokens_loaded + wt) * bk * FP16, mma_flops=2.0 * tt * wt * bk,
                serial=True, smem_bytes=smem, bulk=sm != 80)  # TMA from Hopper on; SM80: cp.async
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    w_bytes, x_bytes, y_bytes = float(n * k * FP16), float(m * k * FP16), float(m * n * FP16)
    w_hit, x_hit, y_kept = replay_hits(int(cfg.get("w_copies", 0)), w_bytes, x_bytes, y_bytes, r, p)
    reads = w_bytes - w_hit + x_bytes - max(x_hit, residency_credit(resident, x_bytes)) + bias
    writes = y_bytes - y_kept
    tile_out = y_bytes / tiles  # what a tile stores: its valid rows (the epilogue is predicated)
    warps = int(cfg["num_warps"]) if sm == 80 else 12
    res = CtaResources(warps, (tokens_loaded + wt) * bk * FP16, 0.0, stages, 168)
    occ = occupancy(res, r) if sm == 80 else Occupancy(1, stages, False, "kernel")
    # Blackwell keeps two accumulators in TMEM: a CTA's epilogue overlaps its next tile's main
    # loop, so only its last tile's is exposed (AccumulatorPipelineStageCount, module doc)
    if int(cfg.get("stream_k", 0)):
        work = _stream_k_work(trip, res, reads, writes, int(grid[0]), tiles, trips, tt * wt,
                              tile_out, sm, r, p)
    elif sm == 90 and split > 1:  # the slices' fp32 partials, then splitKreduce_kernel adds them
        ctas = tiles * split
        epi = Epilogue(tt * wt * FP32, latency_ns=p.cublas.tile_ns)
        work = KernelWork(trip, epi, (cdiv(trips, split),), "single", ctas, ctas, res, reads,
                          dram_write_bytes=0.0, name="cublas split-K")
        return [KernelPart(work, occ), split_reduce_part(m, n, split, writes, r, p)]
    else:
        if grid and int(grid[0]) != tiles * split:
            raise ValueError(f"cuBLAS grid {grid} does not match {tiles} tiles x {split} K slices "
                             f"of M={m}, N={n}")
        tile_ns = p.cublas.tile_ns * (min(1.0, r.sms / tiles) if sm == 100 else 1.0)
        if split > 1:  # serial split-K: each slice adds its fp32 partial in turn (a semaphore)
            epi = Epilogue(tile_out / split, ws_bytes=2.0 * tt * wt * FP32, reduce_ops=tt * wt,
                           sync=True, latency_ns=tile_ns)
        else:
            epi = Epilogue(tile_out, latency_ns=tile_ns)
        ctas = tiles * split
        work = KernelWork(trip, epi, (cdiv(trips, split),), "single", ctas, ctas, res, reads,
                          dram_write_bytes=writes, l2_kept_stores=y_kept / y_bytes if y_bytes else 0.0,
                          name="cublas")
    return [KernelPart(work, occ)]


def _stream_k_work(trip: Trip, res: CtaResources, reads: float, writes: float, ctas: int,
                   tiles: int, trips: int, tile_elems: int, tile_out: float, sm: int,
                   r: GpuRates, p: SimParams) -> KernelWork:
    """A persistent stream-K grid: every (tile, K trip) unit dealt evenly over `ctas` CTAs.
    Hopper: the CTAs sharing a tile add their partials in turn (CUTLASS's default Deterministic
    stream-K: wait_eq on the tile's lock; an assumption for cuBLAS's closed kernels that the H200
    rows support); Blackwell: one fix-up a split tile (its rows do not support the turnstile:
    docs/validation.md), and two TMEM accumulators expose only a CTA's last tile's epilogue.
    A CTA's tiles finish inside its loop: each tile's store and (Hopper) its epilogue's
    `tile_ns` are spread over the CTA's trips (`Trip.store_bytes`, `overhead_cycles`), so the
    producer keeps loading `stages` ahead while the consumer stores a tile; the fix-ups and
    Blackwell's last exposed epilogue stay after the loop."""
    per = cdiv(tiles * trips, ctas)
    tiles_per = cdiv(tiles, ctas)
    split_tile = per % trips != 0  # a CTA's share ends inside a tile (never for one-trip tiles)
    peers = (max(2, cdiv(trips, per)) if sm == 90 else 2) if split_tile else 1
    inline = 0 if sm == 100 else tiles_per  # tile epilogues the consumer runs inside its loop
    trip = replace(trip, store_bytes=trip.store_bytes + tiles_per * tile_out / per,
                   overhead_cycles=trip.overhead_cycles
                   + inline * p.cublas.tile_ns * 1e-9 * r.clock_hz / per)
    end_ns = (1 if sm == 100 else 0) * p.cublas.tile_ns + (peers - 1) * p.cublas.sk_fixup_us * 1e3
    epi = Epilogue(0.0, ws_bytes=2.0 * tile_elems * FP32 if split_tile else 0.0, latency_ns=end_ns)
    return KernelWork(trip, epi, (per,), "single", ctas, ctas, res, reads, dram_write_bytes=writes,
                      name="cublas stream-K")


def split_reduce_part(m: int, n: int, split: int, writes: float, r: GpuRates,
                      p: SimParams) -> KernelPart:
    """cuBLAS's splitKreduce_kernel: reads the slices' fp32 partials (from L2: the GEMM kernel
    just wrote them) and writes the 16-bit output; latency-bound, one round trip of
    `cublas.reduce_ns` per CTA over at most one CTA an SM."""
    partials = float(m * n * FP32 * split)
    count = max(1, min(r.sms, cdiv(m * n, 4096)))
    trip = Trip(partials / count, 0.0, latency_ns=p.cublas.reduce_ns, overlap_latency=True)
    res = CtaResources(16, 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(writes / count), (1,), "single", count, count, res, 0.0,
                      dram_write_bytes=writes, name="cublas splitK reduce")
    return KernelPart(work, Occupancy(1, 1, False, "kernel"))


WORK = dict.fromkeys(KERNELS, cublas_work)
