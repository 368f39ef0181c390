"""GemLite's Triton A16Wn kernels (`gemlite_gemv_revsplitk`, `gemlite_gemm_splitk`, `gemlite_gemm`
rows; names, configs and row builder: mpsim/library/gemlite.py) as CTA work.

Row: op gemm, w_format int2/int4/int8-group; config block_m/n/k, split_k, num_warps and
`zero_init` (the output is zeroed by a fill kernel before a launch whose CTAs add into it).

Each CTA loads packed int32 words (32 / bits codes along K), the group's scale and zero, and the
fp16 activations, unpacks every code on its own (shift, mask, int -> fp16, (q - z) * s), and then
- GEMV_REVSPLITK: multiplies one activation row on CUDA cores over two BLOCK_K chunks, no K loop,
  and adds its BLOCK_N partial sums to the output atomically;
- GEMM_SPLITK / GEMM: feeds the dequantized tile to tl.dot in a K loop; split-K CTAs add atomically.
CUDA-core work is the kernel's own: lanes per weight by pipe counted from its sm_90a SASS
(gemlite_sass.py, scripts/sass_gemlite.py; every code takes an I2F on the 16-lane conversion pipe,
which bounds the one-row GEMV on Hopper). The GEMV's thousands of CTAs are one trip each, many
resident per SM and out of step: latency is hidden by that parallelism (the memory model's first
tile), each co-resident CTA simulated on its own. The GEMMs' K loops are priced as mpsim's own
Triton GEMMs of the same construction measured on an H200: a quantized W on its way to tl.dot runs
unpipelined, lock-step trips (mpsim_gemm.lockstep_trip_ns; docs/validation.md#mpsims-own-kernels-on-an-h200).
That is an assumption for GemLite: its SASS (Triton 3.9, num_stages > 1) stages the packed words
with cp.async as mpsim's tiled GEMM's does, and no GemLite kernel time is published.
Atomic adds are a read-modify-write of the partial in L2 (the epilogue's `ws_bytes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.library.gemlite import GEMLITE_GEMM, GEMLITE_GEMV, KERNELS
from mpsim.sim.gpu.library.gemlite_sass import COLUMNS, ROWS
from mpsim.sim.gpu.library.mpsim_gemm import MMA_MIN_COLS, lockstep_trip_ns
from mpsim.sim.gpu.memory import gemm_dram_reads, residency_credit, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.sass import tile_distance
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16, gemm_weight_bytes

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

TABLE: tuple[dict[str, Any], ...] = tuple(dict(zip(COLUMNS, r, strict=True)) for r in ROWS)
PIPES = ("fp32", "alu", "cvt", "lsu", "issue")
FILL_THREADS, FILL_ELEMENTS = 128, 4   # PyTorch's vectorized fill: 128 threads x 4 values a thread


def gemlite_mix(kernel: str, bits: int, bm: int, bn: int, bk: int, warps: int) -> dict[str, float]:
    """Lanes per weight by pipe: the counted row of the kernel and bits with the nearest tile."""
    rows = [r for r in TABLE if r["kernel"] == kernel and r["bits"] == bits]
    if not rows:
        raise ValueError(f"no SASS mix for {kernel} at {bits} bits (scripts/sass_gemlite.py counts "
                         f"{sorted({(r['kernel'], r['bits']) for r in TABLE})})")
    best = min(rows, key=lambda r: tile_distance(r, bm, bn, bk, warps))
    return {p: float(best[p]) for p in PIPES}


def fill_part(out_bytes: float, r: GpuRates) -> KernelPart:
    """The output's zero fill (GemLite's init_to_zero pre_hook, `tensor.zero_()`)."""
    ctas = max(1, math.ceil(out_bytes / (FILL_THREADS * FILL_ELEMENTS * FP16)))
    res = CtaResources(FILL_THREADS // 32, 0.0, 0.0, 1, 32)
    work = KernelWork(Trip(0.0, 0.0), Epilogue(out_bytes / ctas), (1,), "single", ctas, ctas, res,
                      0.0, dram_write_bytes=out_bytes, name="gemlite zero fill")
    return KernelPart(work, occupancy(res, r))


def gemlite_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> LaunchWork:
    kernel = str(row["kernel"])
    m, n, k, bits = int(row["m"]), int(row["n"]), int(row["k"]), int(row["w_bits"])
    group = int(row.get("group_size") or k)
    bm, bn, bk = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"])
    split, warps = int(cfg.get("split_k", 1)), int(cfg["num_warps"])
    w_total = float(gemm_weight_bytes(m, n, k, str(row["w_format"]), bits, group))
    a_total = float(m * k * FP16)
    out = float(m * n * FP16)
    mix = gemlite_mix(kernel, bits, bm, bn, bk, warps)
    gemv = kernel == GEMLITE_GEMV
    chunk = 2 * bk if gemv else bk   # K columns a trip covers (the GEMV: its two chunks, no loop)
    weights = chunk * bn
    rows_in = min(bm, m)
    # packed codes, the group's scale and zero (once per trip: BLOCK_K <= group), activations
    load = weights * bits / 8 + bn * 2 * FP16 + rows_in * chunk * FP16
    m_tiles, n_tiles = -(-m // bm), -(-n // bn)
    if gemv:
        ctas, trips = n_tiles * -(-k // chunk), 1
    else:
        ctas, trips = m_tiles * n_tiles * split, -(-k // (bk * split))
    atomic = gemv or split > 1
    threads = 32 * warps
    res = CtaResources(warps, 0.0 if gemv else bm * bk * FP16 + weights * FP16, 0.0, 1,
                       registers_per_thread(bm * bn, weights, threads, r.max_regs_per_thread))
    occ = occupancy(res, r)
    trip = Trip(load_bytes=load,
                mma_flops=0.0 if gemv else 2.0 * bn * max(bm, MMA_MIN_COLS) * bk,
                pipes={pipe: v * weights for pipe, v in mix.items()}, serial=False,
                latency_ns=None if gemv else lockstep_trip_ns(load, ctas, occ.ctas_per_sm, r),
                overlap_latency=not gemv)
    tile_out = rows_in * bn * FP16
    epi = Epilogue(tile_out, ws_bytes=2.0 * tile_out if atomic else 0.0,
                   reduce_ops=rows_in * bn if atomic else 0.0)
    if kernel == GEMLITE_GEMM:
        reads = gemm_dram_reads(a_total, w_total, m_tiles, n_tiles, r.sms * occ.ctas_per_sm,
                                usable_l2(r, p), int(cfg.get("group_m", 8)))
    else:
        reads = w_total + a_total
    reads += (n * FP16 if bool(row.get("bias") or False) else 0) - residency_credit(resident, a_total)
    # the GEMV's CTAs are independent one-trip programs: each co-resident one runs on its own, so
    # one's loads overlap another's unpacking (no loop keeps them in step)
    work = KernelWork(trip, epi, (trips,), "single", ctas, ctas, res, reads, dram_write_bytes=out,
                      name=kernel, resident_split=occ.ctas_per_sm if gemv else 0)
    parts = [KernelPart(work, occ)]
    if int(cfg.get("zero_init", 0)):
        parts.insert(0, fill_part(out, r))
    return parts


WORK = dict.fromkeys(KERNELS, gemlite_work)
