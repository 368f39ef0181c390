"""cuBLAS bf16/fp16 GEMM on Hopper (`cublas_gemm` rows) as CTA work (name, candidates and row
builder: mpsim/library/cublas.py).

Row: op gemm, w_format fp16 (bf16 is read as fp16); config from `cublas_candidates` /
`cublas_heuristic`: block_m = token tile, block_n = weight tile, block_k 64, `stream_k` 0/1;
grid = the tiles, or the persistent CTAs.


cuBLAS runs y = x W^T column-major as W x^T: the weight rows are the wgmma M side (64-row
warpgroups), the tokens its N side (any multiple of 8 up to 256). A config is a token tile TT, a
weight tile WT and a schedule (mpsim/library/cublas.py cublas_candidates): data-parallel tiles in
waves of one CTA per SM, or a persistent stream-K grid (min(units, SMs) CTAs, every (tile, K trip)
unit dealt evenly). The tiles of a launch split M evenly: tt = ceil(M / ceil(M / TT)) rounded up to
the wgmma granule (so padding costs little and time stays smooth in M, as measured). Per K trip of
64 a CTA loads (tt + WT) x 64 elements through its L2 port and runs 2 tt WT 64 FLOPs on the tensor
cores, or longer when the operands' shared-memory reads (A and B from smem) bound the wgmmas.
Each output tile pays an epilogue not overlapped with the next tile (accumulator convert, smem
staging, TMA store) plus its bytes through the port; a stream-K tile split between CTAs pays a
fix-up (partial written, flag, read back). Constants: CublasParams, SimParams.cublas (GEMM rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.cublas import KERNELS
from mpsim.sim.gpu.memory import residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4


@dataclass(frozen=True)
class CublasParams:
    """cuBLAS bf16/fp16 GEMM on Hopper (GEMM rows); SimParams.cublas (`--fit-params cublas.NAME`).
    Where a value came from: mpsim/sim/params.py's docstring names the row sets."""

    tile_ns: float = 763.4               # per output tile: epilogue not overlapped with the next tile
    sk_fixup_us: float = 1.121           # stream-K: a split tile's partial written, flag, read back
    token_granule: int = 8               # wgmma N granularity of the token side of a tile


def token_tile(m: int, nominal: int, granule: int) -> tuple[int, int]:
    """(token tile used, token tiles): the tiles split M evenly, rounded up to the granule."""
    tiles = cdiv(m, nominal)
    return cdiv(cdiv(m, tiles), granule) * granule, tiles


def cublas_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                p: SimParams, resident: float) -> LaunchWork:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    wt, bk, stages = int(cfg["block_n"]), int(cfg["block_k"]), int(cfg["num_stages"])
    tt, m_tiles = token_tile(m, int(cfg["block_m"]), p.cublas.token_granule)
    tiles = m_tiles * cdiv(n, wt)
    trips = cdiv(k, bk)
    trip = Trip(load_bytes=(tt + wt) * bk * FP16, mma_flops=2.0 * tt * wt * bk, serial=True,
                smem_bytes=(wt / 64) * (bk / 16) * (64 + tt) * 16 * FP16)
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    reads = FP16 * (n * k + m * k) + bias - residency_credit(resident, m * k * FP16)
    tile_out = tt * wt * FP16
    res = CtaResources(12, (tt + wt) * bk * FP16, 0.0, stages, 168)
    occ = Occupancy(1, stages, False, "kernel")
    if int(cfg.get("stream_k", 0)):
        ctas = int(grid[0])
        units = tiles * trips
        per = cdiv(units, ctas)
        tiles_per = cdiv(tiles, ctas)
        split = units % ctas != 0 or tiles < ctas
        epi = Epilogue(tiles_per * tile_out, ws_bytes=2.0 * tt * wt * FP32 if split else 0.0,
                       latency_ns=tiles_per * p.cublas.tile_ns
                       + (p.cublas.sk_fixup_us * 1e3 if split else 0.0))
        work = KernelWork(trip, epi, (per,), "single", ctas, ctas, res, reads,
                          dram_write_bytes=float(m * n * FP16), name="cublas stream-K")
    else:
        if grid and int(grid[0]) != tiles:
            raise ValueError(f"cuBLAS grid {grid} does not match {tiles} tiles of M={m}, N={n}")
        epi = Epilogue(tile_out, latency_ns=p.cublas.tile_ns)
        work = KernelWork(trip, epi, (trips,), "single", tiles, tiles, res, reads, name="cublas")
    return [KernelPart(work, occ)]


WORK = dict.fromkeys(KERNELS, cublas_work)
