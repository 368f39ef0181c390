"""GEMV and tiled GEMM launches (kernels/gemm_*.py) as CTA work.

GEMV (M <= 16): grid (N tiles, K splits); each CTA streams BLOCK_N weight rows over its K split in
BLOCK_K trips, dequantizing each tile on CUDA cores; one activation row multiplies on CUDA cores
(fp32 FMA), 2..16 rows run a swap-AB MMA padded to 16 columns. Splits exchange fp32 partials in L2.
Tiled GEMM: grid of BLOCK_M x BLOCK_N output tiles in grouped order, a BLOCK_K K-loop, dequantized
W tile then MMA (the asynchronous MMA of one tile overlaps the next tile's dequantization).
Pipelining: Triton software-pipelines only loads that feed tl.dot as they are, so fp16 loops keep
num_stages trips in flight, while the one-row GEMV and every quantized W run unpipelined, lock-step
trips (`lockstep_trip_ns`; measured so on an H200: docs/validation.md#mpsims-own-kernels-on-an-h200),
unless every load of the trip is staged (a group config with `sz_words`: its scales and zeros read
as 4-byte words cp.async can copy, kernels/sz_words.py; then num_stages trips in flight) or the
loop asks for stages: a one-row GEMV config with `loop_stages` (its K loop written
tl.range(num_stages=loop_stages): every load of a trip copied asynchronously into shared memory
that many trips ahead, kernels/loop_stages.py LOOP_STAGES_KEY) is priced as a pipeline of that
depth, its instruction mix counted from the pipelined loop's SASS (docs/kernels.md#pipelined-k-loops;
an assumption until a GPU measures it: the GPU kit times both loops side by side).

The CUDA-core work of a trip is the kernel's own: the per-weight instruction mix of its compiled K
loop by issue pipe (mpsim/sim/gpu/sass.py, counted from the sm_90a SASS by scripts/sass_mix.py)
times the weights of the tile, so dequantization, unpacking, the one-row multiply and the loop's
own address arithmetic cost what the shipped kernel issues.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import (
    GEMM_GROUP_M,
    LOOP_STAGES_KEY,
    _format_tag,
    cdiv,
    gemv_trips,
    lut_words_of,
    prefetched_in_registers,
    sz_words_of,
)
from mpsim.sim.gpu.arch import sm_major
from mpsim.sim.gpu.memory import gemm_dram_reads, residency_credit, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.sass import per_weight_mix
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip
from mpsim.traces.accounting import FP16, PAIR_MAX_BITS, gemm_weight_bytes, padded_k

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

MMA_MIN_COLS = 16  # tl.dot needs at least 16 along every dimension
# registers of the one-row partial-sum loops at the launchers' 256 x 32 tile, by format and SASS arch
# (ptxas -v, Triton 3.9, the most over 2..4 bits and the loop forms each arch ships, which differ by
# a few: sm_90a group 255 / 255 / 254 staged, 254 / 246 prefetched, any-precision 255; sm_80 group
# 160-168, any-precision 192-194): the per-thread estimate (registers_per_thread) gave 98, so the
# model ran four CTAs an SM where the compiled loops fit two (three for sm_80's group loops)
PARTIAL_SUM_REGISTERS = {("group", "sm_90a"): 255, ("group", "sm_80"): 168,
                         ("anyprec", "sm_90a"): 255, ("anyprec", "sm_80"): 194}
PARTIAL_SUM_TILE = (256, 32)
FP32 = 4


def loop_k(k: int, w_format: str, group_size: int | None) -> int:
    """The K a GEMM's K loop covers: fp16 K as is, a quantized weight's padded K (accounting)."""
    if w_format == "fp16":
        return k
    return padded_k(k, group_size if w_format.endswith("-group") else None)


def trip_pipes(kernel: str, bits: int, cfg: Mapping[str, int],
               arch: str = "sm_90a") -> dict[str, float]:
    """Lanes by pipe of one K trip of a BLOCK_N x BLOCK_K weight tile (the kernel's SASS mix on
    `arch`, the device's GpuRates.sass_arch)."""
    bm, bn, bk = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"])
    mix = per_weight_mix(kernel, bits, bm, bn, bk, int(cfg["num_warps"]), arch,
                         loop_stages=int(cfg.get(LOOP_STAGES_KEY, 0)) if bm == 1 else 0)
    return {k: v * bn * bk for k, v in mix.items()}


def lockstep_trip_ns(cta_bytes: float, ctas: int, ctas_per_sm: int, r: GpuRates) -> float:
    """One trip of an unpipelined loop whose CTAs all load at once: a register load's round trip
    (`SimParams.load_latency_ns`, or the file's `dram.load_latency_ns`) plus the time HBM takes to
    serve every resident CTA's loads. The memory system interleaves the requests of all CTAs, so
    each CTA's last bytes arrive near the end of the wave, not after its own share (what a FIFO of
    whole trips would give): trips do not overlap each other's latency. `ctas`: the launch's, of
    which at most `ctas_per_sm` an SM are resident at once."""
    resident = min(ctas, r.sms * ctas_per_sm)
    return (r.load_latency + resident * cta_bytes / r.dram_Bpc) / r.clock_hz * 1e9


def stored_bytes(w_format: str, bits: int) -> float:
    return FP16 if w_format == "fp16" else bits / 8


def _staged_bytes(fmt: str, bits: int, block_m: int) -> float:
    """Shared memory per weight of a pipelined GEMV trip: the stored bits, and with one row at
    <= PAIR_MAX_BITS any-precision's pair-table words too (4 B per two weights: Triton stages the
    gathers of a pipelined loop with cp.async like every other load; Hopper's loop prefetches in
    registers and stages nothing). At 2..16 rows it stages them one trip deep, not num_stages
    (sm_90a, Triton 3.9, 3 bits, 16 rows, 64 x 128, 3 stages: 31 744 B compiled, about the codes'
    and x's three stages and one of the gathers); not counted there."""
    pairs = 2.0 if fmt == "anyprec" and block_m == 1 and bits <= PAIR_MAX_BITS else 0.0
    return stored_bytes(fmt, bits) + pairs


def trip_staged(fmt: str, bits: int, cfg: Mapping[str, int]) -> bool:
    """Whether every load of a quantized W's tl.dot trip (2..16 rows, tiled) is staged by cp.async,
    so the loop runs num_stages trips in flight: a group weight read as scale-zero words (the
    config's sz_words, kernels/sz_words.py), any-precision at <= PAIR_MAX_BITS (its plane words and
    its 4-byte pair-table gathers go through LDGSTS: sm_90a SASS of the 16-row GEMV and the tiled
    GEMM, Triton 3.9) and at 4 bits with the config's lut_words (4-byte LUT words, the same;
    kernels/lut_words.py). Not any-precision's 2-byte LUT gathers (a config without lut_words, or
    wider than 4 bits: they, and the plane words they address, stay register loads, LDG in the same
    SASS), nor a group config without sz_words (2-byte scale and zero loads, a round trip a trip)."""
    if fmt.endswith("-group"):
        return sz_words_of(cfg)
    return fmt == "anyprec" and (bits <= PAIR_MAX_BITS or lut_words_of(cfg))


def gemm_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    if str(row["kernel"]).startswith("gemv"):
        return _gemv(row, cfg, grid, r, p, resident)
    return _tiled(row, cfg, grid, r, p, resident)


def _operands(row: Mapping[str, Any]) -> tuple[int, int, int, float, float, float]:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    w = gemm_weight_bytes(m, n, k, row["w_format"], int(row["w_bits"]), _group(row))
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    return m, n, k, float(w), float(m * k * FP16), float(bias)


def _group(row: Mapping[str, Any]) -> int | None:
    g = row.get("group_size")
    return None if g is None else int(g)


def _gemv(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
          p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    m, _, k, w_total, a_total, bias = _operands(row)
    fmt, bits = row["w_format"], int(row["w_bits"])
    bm, bn, bk, split = cfg["block_m"], cfg["block_n"], cfg["block_k"], cfg.get("split_k", 1)
    n_blocks = grid[0]
    kp = loop_k(k, fmt, _group(row))
    # a loop iteration of the one-row partial sums (group and any-precision GEMVs) covers T of the
    # model's BLOCK_K trips, and a split whole runs of T tiles (kernels/launch_config.py gemv_k_unit)
    tiles = gemv_trips(_format_tag(fmt), bits, _group(row), bm, bk)
    unit = bk * tiles
    per_split = cdiv(cdiv(kp, split), unit) * unit  # kernels/gemm_common.py::k_per_split
    full = per_split // bk
    last = max(0, cdiv(kp - (split - 1) * per_split, bk))
    iters = (full,) * (split - 1) + (last,)
    trips_per_row_block = max(1, sum(iters))
    written = float(row["bytes_written"])
    total = n_blocks * split
    load_bytes = w_total / (n_blocks * trips_per_row_block) + m * bk * FP16
    epi = Epilogue(written / total, ws_bytes=2.0 * bn * m * FP32 if split > 1 else 0.0,
                   reduce_ops=float(bn * m) if split > 1 else 0.0, sync=split > 1)
    one_row = bm == 1
    # Triton software-pipelines only loads that feed tl.dot as they are: one row (the tiles go to
    # registers, multiplied on CUDA cores) and a quantized W (dequantized in registers before its
    # tl.dot) run unpipelined, lock-step trips whatever num_stages says (docs/simulator.md#one-row-gemv),
    # unless the loop asks: a one-row config with `loop_stages` S (kernels/loop_stages.py
    # LOOP_STAGES_KEY) runs tl.range(num_stages=S), every load of a trip copied asynchronously into
    # shared memory S trips ahead (cp.async in the sm_90a and sm_80 SASS; docs/kernels.md#pipelined-k-loops)
    # 2..16 rows of a quantized W whose trip has every load staged (trip_staged) run num_stages
    # trips in flight, as fp16's tl.dot loops do
    looped = int(cfg.get(LOOP_STAGES_KEY, 0)) if one_row else 0
    # the group partial sums at 2 and 3 bits, and any-precision's (<= PAIR_MAX_BITS) on Hopper and
    # later, prefetch the next run in registers instead: two stages, nothing in shared memory
    # (kernels/loop_stages.py prefetched_in_registers)
    in_registers = looped > 0 and tiles > 1 and prefetched_in_registers(
        _format_tag(fmt), bits, sm_major(r.sass_arch))
    looped = 2 if in_registers else looped
    unpipelined = looped == 0 and (one_row or (fmt != "fp16" and not trip_staged(fmt, bits, cfg)))
    # a pipelined one-row loop holds loop_stages - 1 iterations of T tiles in flight, in shared memory
    # (the compiled kernels' shared memory: fp16 64 x 64, int4 256 x 32) or in registers
    stages = max(1, looped - 1) * tiles if looped else (1 if unpipelined else cfg["num_stages"])
    staged = not one_row or (looped > 0 and not in_registers)  # the tiles pass through shared memory
    regs = _gemv_registers(fmt, tiles, cfg, r)
    res = CtaResources(cfg["num_warps"], bn * bk * _staged_bytes(fmt, bits, bm) + bm * bk * FP16
                       if staged else 0.0, 0.0, stages, regs)
    occ = occupancy(res, r)
    trip = Trip(
        load_bytes=load_bytes, mma_flops=0.0 if one_row else 2.0 * bn * max(bm, MMA_MIN_COLS) * bk,
        pipes=trip_pipes(str(row["kernel"]), bits, cfg, r.sass_arch), serial=False,
        latency_ns=lockstep_trip_ns(load_bytes, total, occ.ctas_per_sm, r)
        if unpipelined else None, overlap_latency=unpipelined)
    reads = w_total + a_total - residency_credit(resident, a_total) + bias
    return KernelWork(trip, epi, iters, "outer", n_blocks, total, res, reads), occ


def _gemv_registers(fmt: str, tiles: int, cfg: Mapping[str, int], r: GpuRates) -> int:
    """Registers a thread of a GEMV CTA: what ptxas gives the one-row partial sums (T > 1 K tiles a
    run) at their 256 x 32 tile (PARTIAL_SUM_REGISTERS), else the per-thread estimate."""
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    compiled = PARTIAL_SUM_REGISTERS.get((_format_tag(fmt), r.sass_arch))
    if bm == 1 and tiles > 1 and (bn, bk) == PARTIAL_SUM_TILE and compiled:
        return min(compiled, r.max_regs_per_thread)
    return registers_per_thread(bn * bm, bn * bk * (2 if bm == 1 else 1), cfg["num_warps"] * 32,
                                r.max_regs_per_thread)


def _tiled(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
           p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    m, n, k, w_total, a_total, bias = _operands(row)
    fmt, bits = row["w_format"], int(row["w_bits"])
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    m_tiles, n_tiles = -(-m // bm), -(-n // bn)
    iters = -(-loop_k(k, fmt, _group(row)) // bk)
    load_bytes = (m / m_tiles) * bk * FP16 + w_total / (n_tiles * iters)
    total = m_tiles * n_tiles
    if grid and grid[0] != total:
        raise ValueError(f"GEMM grid {grid} does not match {m_tiles} x {n_tiles} tiles of M={m}, N={n}")
    epi = Epilogue(float(row["bytes_written"]) / total)
    dequant_tile = bn * bk if fmt != "fp16" else 0
    # a quantized W reaches tl.dot through its dequantization: unpipelined, lock-step trips (the H200
    # capture's int4 tiled GEMMs at M = 512 took 1.4-2.1 us a trip and wave: their scales and zeros
    # 2-byte register loads, one round trip a trip), unless every load of its trip is staged
    # (trip_staged: num_stages trips in flight)
    unpipelined = fmt != "fp16" and not trip_staged(fmt, bits, cfg)
    res = CtaResources(cfg["num_warps"], bm * bk * FP16 + bn * bk * stored_bytes(fmt, bits), 0.0,
                       1 if unpipelined else cfg["num_stages"], registers_per_thread(
                           bm * bn, dequant_tile, cfg["num_warps"] * 32, r.max_regs_per_thread))
    occ = occupancy(res, r)
    trip = Trip(
        load_bytes=load_bytes,
        mma_flops=2.0 * bm * bn * bk, pipes=trip_pipes(str(row["kernel"]), bits, cfg, r.sass_arch),
        serial=False,
        # swap-AB wgmma: the W tile from registers, the activation tile from shared memory
        smem_bytes=(bn / 64) * (bk / 16) * bm * 16 * FP16,
        latency_ns=lockstep_trip_ns(load_bytes, total, occ.ctas_per_sm, r)
        if unpipelined else None, overlap_latency=unpipelined)
    slots = r.sms * occ.ctas_per_sm
    # Traces written before the config recorded group_m ran every tiled GEMM in GEMM_GROUP_M bands.
    group_m = int(cfg.get("group_m", GEMM_GROUP_M))
    reads = gemm_dram_reads(a_total, w_total, m_tiles, n_tiles, slots, usable_l2(r, p), group_m)
    reads += bias - residency_credit(resident, a_total)
    return KernelWork(trip, epi, (iters,), "single", total, total, res, reads), occ
