"""mpsim's own fp8 / fp4 kernels (issue 26; rows: mpsim/library/mpsim_fp.py) as CTA work.

GEMMs (gemm_fp8_kernel, gemm_fp8b_kernel, gemv_fp4_kernel): grid (BLOCK_M x BLOCK_N tiles, K
splits); each CTA streams its split of K in BLOCK_K trips. W8A8 (fp8, fp8-block): both operands are
e4m3 codes (1 B a value plus scales), multiplied on the fp8 tensor cores (`mma_dtype` fp8: a device
whose hardware file lists no fp8 tensor rate, A100, is one error naming it, rates.py tensor_rate);
one activation row is padded to the 16-row MMA. FP4 weight-only (nvfp4, mxfp4): e2m1 decoded to fp16
on CUDA cores, one row multiplied with fp32 FMAs, more rows on the fp16 tensor cores. The CUDA-core
work of a trip is the kernel's own: its sm_90a SASS mix per weight (mpsim/sim/gpu/sass_table_fp.py
through sass.py) times the BLOCK_N x BLOCK_K weights of the trip. Splits exchange fp32 partials in L2
(kernels/gemm_common.py splitk_finish). DRAM reads: weights and activations once (their scales
counted in by traces/accounting.py), a tiled launch's re-reads by memory.py gemm_dram_reads.

The activation quantizer (fp8_act_quant_kernel) is a row-wise launch (mpsim_rowwise.py) whose trip
work is its convert loop's SASS mix per activation; its absmax pass re-reads the row (two passes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import GEMM_GROUP_M, LOOP_STAGES_KEY, cdiv
from mpsim.kernels.launch_config_fp import FP4_BLOCKS
from mpsim.sim.gpu.library.mpsim_gemm import lockstep_trip_ns
from mpsim.sim.gpu.library.mpsim_rowwise import rowwise_work
from mpsim.sim.gpu.memory import gemm_dram_reads, residency_credit, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates, tensor_rate
from mpsim.sim.gpu.sass import per_weight_mix
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip
from mpsim.traces.accounting import FP16, activation_bytes, weight_bytes

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

MMA_MIN_ROWS = 16  # tl.dot needs at least 16 along every dimension
FP32 = 4
W8A8 = ("fp8", "fp8-block")


def fp_gemm_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    fmt, bits = str(row["w_format"]), int(row["w_bits"])
    group = row.get("group_size")
    w_total = float(weight_bytes(n, k, fmt, bits, None if group is None else int(group)))
    w8a8 = fmt in W8A8
    if w8a8:  # e4m3 x e4m3 on the fp8 tensor cores: a device without them (A100) is this error, not a
        tensor_rate(r, "fp8")  # missing SASS row further down
    a_elem = 1 if w8a8 else FP16
    a_total = float(activation_bytes(m, k, "fp8-e4m3" if w8a8 else "fp16", fmt))
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    bm, bn, bk = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"])
    split, warps = int(cfg.get("split_k", 1)), int(cfg["num_warps"])
    m_tiles, n_tiles = cdiv(m, bm), cdiv(n, bn)
    tiles = m_tiles * n_tiles
    if grid and int(grid[0]) != tiles:
        raise ValueError(f"{row['kernel']}: grid {grid} does not match {m_tiles} x {n_tiles} tiles "
                         f"of M={m}, N={n}")
    kp = cdiv(k, FP4_BLOCKS[fmt]) * FP4_BLOCKS[fmt] if fmt in FP4_BLOCKS else k
    trips = cdiv(kp, bk)
    per_split = cdiv(cdiv(kp, split), bk) * bk  # kernels/gemm_common.py k_per_split
    last = max(0, cdiv(kp - (split - 1) * per_split, bk))
    iters = (per_split // bk,) * (split - 1) + (last,)
    rows_in_tile = min(m, bm)
    one_row = bm == 1
    looped = int(cfg.get(LOOP_STAGES_KEY, 0)) if one_row else 0
    mix = per_weight_mix(str(row["kernel"]), bits, bm, bn, bk, warps, r.sass_arch, w_format=fmt,
                         loop_stages=looped)
    load_bytes = w_total / (n_tiles * trips) + rows_in_tile * bk * a_elem
    written = float(row["bytes_written"])
    epi = Epilogue(written / (tiles * split), ws_bytes=2.0 * bn * rows_in_tile * FP32 if split > 1 else 0.0,
                   reduce_ops=float(bn * rows_in_tile) if split > 1 else 0.0, sync=split > 1)
    w_elem = 1.0 if w8a8 else bits / 8
    dequant_tile = 0 if w8a8 else bn * bk * (2 if one_row else 1)
    # one row (the FP4 GEMV on CUDA cores) and any FP4 W (decoded in registers before its tl.dot):
    # one stage, lock-step trips, as mpsim_gemm's (Triton pipelines only loads that feed tl.dot as
    # they are; the W8A8 codes do), unless a one-row config's loop_stages pipelines the loop
    unpipelined = (one_row or not w8a8) and looped == 0
    staged = not one_row or looped > 0
    res = CtaResources(warps, bn * bk * w_elem + bm * bk * a_elem if staged else 0.0, 0.0,
                       looped or (1 if unpipelined else int(cfg["num_stages"])),
                       registers_per_thread(bm * bn, dequant_tile, warps * 32, r.max_regs_per_thread))
    occ = occupancy(res, r)
    trip = Trip(load_bytes=load_bytes,
                mma_flops=0.0 if one_row else 2.0 * bn * max(bm, MMA_MIN_ROWS) * bk,
                pipes={key: v * bn * bk for key, v in mix.items()}, serial=False,
                mma_dtype="fp8" if w8a8 else "fp16",
                latency_ns=lockstep_trip_ns(load_bytes, tiles * split, occ.ctas_per_sm, r)
                if unpipelined else None, overlap_latency=unpipelined)
    if m_tiles > 1:
        reads = gemm_dram_reads(a_total, w_total, m_tiles, n_tiles, r.sms * occ.ctas_per_sm,
                                usable_l2(r, p), int(cfg.get("group_m", GEMM_GROUP_M)))
    else:
        reads = w_total + a_total
    reads += bias - residency_credit(resident, a_total)
    return KernelWork(trip, epi, iters, "outer", tiles, tiles * split, res, reads), occ


def act_quant_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    """fp8_act_quant_kernel: mpsim_rowwise's row walk (two passes over the row), each BLOCK-wide
    trip issuing the convert loop's SASS mix per activation (sass_table_fp.py, act-fp8)."""
    tensor_rate(r, "fp8")  # its codes feed fp8 tensor cores: a device without them is an error here
    work, occ = rowwise_work(row, cfg, grid, r, p, resident)
    block = int(cfg["block_n"])
    mix = per_weight_mix(str(row["kernel"]), 8, 1, block, 1, int(cfg["num_warps"]), r.sass_arch,
                         w_format="act-fp8")
    trip = replace(work.trip, pipes={key: v * block for key, v in mix.items()})
    return replace(work, trip=trip), occ
