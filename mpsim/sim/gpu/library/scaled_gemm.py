"""A scaled low-precision tensor-core GEMM (fp8 e4m3 or nvfp4 e2m1 operands) as CTA work: what the
FP8/FP4 rooms share (cutlass_fp8.py, deepgemm.py, flashinfer_gemm.py, trtllm_fp8.py; configs and
row builders: mpsim/library/scaled_gemm.py and the rooms of the same names there).

GEMM part. A CTA owns a TT x WT output tile (TT tokens, WT weight rows) and walks K in trips of BK.
Per trip it loads TT x BK activations and WT x BK weights (half with `pair`) at their element width
(fp8 1 byte, fp4 half a byte) plus the trip's scales (fp8-block: TT fp32 activation scales and one
per 128 weight rows; nvfp4: one e4m3 byte per 16 values of both operands) through its L2 port, and
runs 2 max(TT, mma_m) WT BK FLOPs at the device's fp8 or fp4 tensor rate (`mma_m`: the MMA's
smallest token-side row count, 64 when the tokens are on wgmma's M side, 8 with swapped operands).
With `promote` (DeepGEMM's design on Hopper) every 128-deep block's fp32 partial sums are scaled and
added into the accumulator by the CUDA cores: `promote_ops` fp32 lane-ops per accumulator element
per block, after the block's MMAs (the math warpgroup waits for its wgmma before it promotes). On
Hopper a tile holding the last token rows pays for its TMA box's rows beyond M (zero-filled) as a
load on the chip's L2 (`edge_bytes`, SimParams.tma_edge_cost), not on its port. A promoting kernel
with one math warpgroup (DeepGEMM's 1D2D kernel at BLOCK_M <= 64) waits for its own wgmma chain
before it promotes, so each trip lasts at least `chain_cycles` (issue to done, then the
promotion) however few FLOPs its MMAs hold (`chain_wait`); two math warpgroups hide it under each
other's MMAs. Per-tensor / per-channel scales are applied once in the epilogue (`tile_ns`, each
room's). Schedules: a data-parallel grid of tiles, persistent CTAs (min(tiles, SMs)) walking the
tiles, or CUTLASS's stream-K heuristic (wo_tiled.py `_stream_k`).

DRAM reads: the weight with its scales and the activation with its scales, once (tiles re-read
through L2); a benchmark's call (`w_copies` in the config: the weight copies it cycled) finds in L2
what the GPU model's replay rule says (mpsim/sim/gpu/memory.py `replay_hits`, the rule cuBLAS's rows
are priced with: all of a weight whose copies, input and output fit the L2's usable share, none
beyond its size, linear between). The call's activation quantization before the GEMM:
mpsim/sim/gpu/library/call_quant.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.scaled_gemm import (
    SCHED_DP,
    SCHED_PERSISTENT,
    SCHED_STREAM_K,
    SM89,
    token_tiles,
)
from mpsim.sim.gpu.library.call_quant import quant_parts
from mpsim.sim.gpu.library.wo_tiled import _stream_k
from mpsim.sim.gpu.memory import cyclic_hits, replay_hits, residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import (
    Epilogue,
    KernelPart,
    KernelWork,
    LaunchWork,
    Trip,
    cuda_cycles,
    tensor_cycles,
)
from mpsim.traces.accounting import FP16, activation_bytes, weight_bytes

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4
SM89_EPI_TILE = 128 * 128  # the output count `sm89_tile_ns` is quoted for


@dataclass(frozen=True)
class ScaledGemmParams:
    """One scaled-GEMM library's constants (each room subclasses it with its own defaults, sources
    in the room's docstring)."""

    tile_ns: float = 763.4        # per output tile: scale epilogue, convert, store (cuBLAS's, CublasParams)
    mma_eta: float = 1.0          # share of the dense fp8/fp4 rate the main loop's MMAs reach
    promote_ops: float = 1.0      # fp32 lane-ops per accumulator element per 128-deep block (one
    #                               FFMA: acc += partial x scale_a x scale_b, DeepGEMM's promotion)
    fixed_ns: float = 0.0         # per launch beyond the kernel floor
    sm89_mma_eta: float = 1.0     # Ada's mma.sync main loop (`sm89_part`): share of the fp8 rate
    #                               (ASSUMPTION: all of it, as cuBLAS's sm80 main loop is priced)
    sm89_tile_ns: float = 300.0   # Ada's epilogue per 128 x 128 outputs of a tile (`sm89_part`)
    sm89_store_cost: float = 0.0  # Ada: DRAM bytes per output byte of an epilogue whose output no
    #                               L2 keeps (`sm89_part`; 0: the output follows the replay rule)
    sm89_store_cost_8warp: float = 0.0  # ... of its 8-warp CTAs (0: sm89_store_cost)
    tma_edge: bool = True         # its token box's rows beyond M load the chip's L2 (`edge_bytes`)
    chain_cycles: float = 0.0     # a lone math warpgroup's trip at the least (`chain_wait`)
    fp4_mma_eta: float | None = None  # its block-scaled fp4 MMAs' own share of the dense fp4 rate
    #                                   (None: SimParams.fp4_mma_eta, `fp4_share`)


def elem_bytes(dtype: str) -> float:
    """Bytes per element of a GEMM operand dtype (a_dtype values, or the weight's w_bits / 8)."""
    return {"fp8-e4m3": 1.0, "fp4-e2m1": 0.5, "fp16": 2.0, "bf16": 2.0}[dtype]


def mma_dtype(fmt: str) -> str:
    return "fp4" if fmt in ("nvfp4", "mxfp4") else "fp8"


def fp4_share(fmt: str, p: SimParams, gp: ScaledGemmParams) -> float:
    """The block-scaled fp4 MMAs' share of the dense fp4 rate (the room's own `fp4_mma_eta`, else
    SimParams.fp4_mma_eta); 1 otherwise."""
    if mma_dtype(fmt) != "fp4":
        return 1.0
    return p.fp4_mma_eta if gp.fp4_mma_eta is None else gp.fp4_mma_eta


def _trip_scale_bytes(fmt: str, tt: int, wt: int, bk: int) -> float:
    if fmt == "fp8-block":
        return tt * FP32 + cdiv(wt, 128) * FP32
    if fmt == "nvfp4":
        return (tt + wt) * bk / 16
    if fmt == "mxfp4":
        return (tt + wt) * bk / 32
    return 0.0


def _smem_bytes(cfg: Mapping[str, int], rows: int, wt: int, bk: int, el: float) -> float:
    """Shared-memory operand reads of one trip's MMAs: wgmma reads the token tile once per 64 weight
    rows (each warpgroup's MMA reads its A and all of B); tcgen05 (`umma`) reads each operand once."""
    if int(cfg.get("umma", 0)):
        return (rows + wt) * bk * el
    return (wt / 64) * (64 + rows) * bk * el


def operand_bytes(row: Mapping[str, Any]) -> tuple[float, float, float]:
    """(weight with its scales, quantized activations with theirs, 16-bit output) of a row."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    group = row.get("group_size")
    group = None if group is None or group != group else int(group)
    return (float(weight_bytes(n, k, str(row["w_format"]), int(row["w_bits"]), group)),
            float(activation_bytes(m, k, str(row["a_dtype"]), str(row["w_format"]))),
            float(m * n * FP16))


def _dram_traffic(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams,
                  resident: float) -> tuple[float, float, float]:
    """(DRAM reads, DRAM writes, the output's share that stays in L2) of the launch: the weight with
    its scales and the activations, less what L2 holds of them (a benchmark's replay of `w_copies`
    weight copies, memory.py `replay_hits`; the previous launch's output), and the 16-bit output,
    less what stays in L2."""
    w_bytes, a_bytes, y_bytes = operand_bytes(row)
    w_hit, a_hit, y_kept = replay_hits(int(cfg.get("w_copies", 0)), w_bytes, a_bytes, y_bytes, r, p)
    reads = w_bytes - w_hit + a_bytes - max(a_hit, residency_credit(resident, a_bytes))
    return reads, y_bytes - y_kept, y_kept / y_bytes if y_bytes else 0.0


def sm89_part(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams,
              gp: ScaledGemmParams, resident: float, name: str) -> KernelPart:
    """Ada's mma.sync kernels (mpsim/library/scaled_gemm.py `sm89_config`): one CTA per tile and K
    slice, as many CTAs an SM as its shared memory and warps allow; a partial token tile runs every
    MMA (the kernels are compiled per tile); per trip every warp reads its warp tile's rows of both
    operands from shared memory (ldmatrix), so the MMAs wait for (warps along the weights x token
    rows + warps along the tokens x weight rows) x K bytes; K slices add their fp32 partials in
    turn (serial split-K, a semaphore); with `promote` (a block-scaled kernel) each K step's partial
    sums are scaled into the accumulator on the CUDA cores after its MMAs (`promote_ops` lane-ops
    per accumulator element per 128 of K). MMAs at `sm89_mma_eta` of the fp8 rate. With
    `sm89_store_cost` (vLLM's c2x epilogue) the output is written to DRAM at that many bytes a
    byte (`sm89_store_cost_8warp` for 8-warp CTAs) and no L2 keeps it."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    fmt = str(row["w_format"])
    tt, wt, bk, stages = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"]), int(cfg["num_stages"])
    split, warps_t, warps_w = int(cfg.get("split_k", 1)), int(cfg["warps_t"]), int(cfg["warps_w"])
    a_el, w_el = elem_bytes(str(row["a_dtype"])), int(row["w_bits"]) / 8
    stage = (tt * a_el + wt * w_el) * bk + _trip_scale_bytes(fmt, tt, wt, bk)
    promote = int(cfg.get("promote", 0)) and gp.promote_ops > 0
    trip = Trip(load_bytes=stage, mma_flops=2.0 * tt * wt * bk, serial=True, mma_dtype=mma_dtype(fmt),
                pipes={"fp32": tt * wt * gp.promote_ops * bk / 128} if promote else {},
                mma_eta=gp.sm89_mma_eta, smem_bytes=(warps_w * tt * a_el + warps_t * wt * w_el) * bk)
    tile_out, epi_ns = tt * wt * FP16, gp.sm89_tile_ns * tt * wt / SM89_EPI_TILE
    if split > 1:
        epi = Epilogue(tile_out / split, ws_bytes=2.0 * tt * wt * FP32, reduce_ops=tt * wt, sync=True,
                       latency_ns=epi_ns)
    else:
        epi = Epilogue(tile_out, latency_ns=epi_ns)
    ctas = cdiv(m, tt) * cdiv(n, wt) * split
    res = CtaResources(int(cfg["num_warps"]), stage, 0.0, stages, 168)
    reads, writes, kept = _dram_traffic(row, cfg, r, p, resident)
    wide = int(cfg["num_warps"]) == 8 and gp.sm89_store_cost_8warp > 0
    cost = gp.sm89_store_cost_8warp if wide else gp.sm89_store_cost
    if cost > 0:  # the output streams to DRAM at `cost` bytes a byte, none of it kept in L2
        writes, kept = m * n * FP16 * cost, 0.0
    work = KernelWork(trip, epi, (cdiv(cdiv(k, bk), split),), "single", ctas, ctas, res, reads,
                      dram_write_bytes=writes, fixed_ns=gp.fixed_ns, l2_kept_stores=kept, name=name)
    return KernelPart(work, occupancy(res, r))


def edge_bytes(m: int, tt: int, row_bytes: float, r: GpuRates) -> float:
    """The chip's L2 load per trip of a tile holding the last token rows: the token box's rows
    beyond M at `r.tma_edge_cost` per byte (module docstring)."""
    return (cdiv(m, tt) * tt - m) * row_bytes * r.tma_edge_cost


def chain_wait(trip: Trip, cfg: Mapping[str, int], r: GpuRates, gp: ScaledGemmParams) -> Trip:
    """The trip of a promoting kernel whose one math warpgroup (a producer warpgroup and one more)
    waits for its wgmma chain before it promotes (deepseek-ai/DeepGEMM sm90_fp8_gemm_1d2d.cuh:
    `warpgroup_wait<0>`, then the scaled adds, then the next block's MMAs): the chain's
    `chain_cycles` less the trip's own MMA and promotion time is exposed every trip (module
    docstring)."""
    if not int(cfg.get("promote", 0)) or int(cfg["num_warps"]) != 8 or gp.chain_cycles <= 0:
        return trip
    busy = tensor_cycles(trip, r) + cuda_cycles(trip, r)
    return replace(trip, overhead_cycles=max(0.0, gp.chain_cycles - busy))


def gemm_part(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams,
              gp: ScaledGemmParams, resident: float, name: str) -> KernelPart:
    """The GEMM kernel of a scaled-GEMM row (module docstring; Ada's: `sm89_part`)."""
    if int(cfg.get("sm", 0)) == SM89:
        return sm89_part(row, cfg, r, p, gp, resident, name)
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    fmt, a_dtype, w_bits = str(row["w_format"]), str(row["a_dtype"]), int(row["w_bits"])
    tt, wt, bk = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"])
    sched, stages, mma_m = int(cfg["sched"]), int(cfg["num_stages"]), int(cfg.get("mma_m", 64))
    a_el, w_el = elem_bytes(a_dtype), w_bits / 8
    pair = bool(int(cfg.get("pair", 0)))
    # whole Hopper clusters: the padding CTAs run tiles of zeros
    tiles = token_tiles(m, tt, pair, bool(int(cfg.get("umma", 0)))) * cdiv(n, wt)
    trips = cdiv(k, bk)
    rows_mma = max(tt, mma_m)
    promote = int(cfg.get("promote", 0)) and gp.promote_ops > 0
    pipes = {"fp32": tt * wt * gp.promote_ops * bk / 128} if promote else {}
    w_load = wt / 2 if pair else wt  # a CTA pair shares the weight tile
    # the token box's rows past M: zero-filled by the TMA unit, a load on the chip's L2 (`edge_bytes`)
    # and no port time, so a lone token tile's port carries M rows (with more, the full tiles pace it)
    edge = gp.tma_edge and r.tma_edge_cost > 0
    a_rows = min(m, tt) if edge else tt
    a_load = a_rows / 2 if int(cfg.get("pair_n", 0)) else a_rows  # ... or the token tile
    trip = Trip(load_bytes=(a_load * a_el + w_load * w_el) * bk + _trip_scale_bytes(fmt, tt, wt, bk),
                mma_flops=2.0 * rows_mma * wt * bk, pipes=pipes, serial=True,
                mma_dtype=mma_dtype(fmt), mma_eta=gp.mma_eta * fp4_share(fmt, p, gp),
                smem_bytes=_smem_bytes(cfg, rows_mma, wt, bk, min(a_el, w_el)), bulk=True,
                edge_bytes=edge_bytes(m, tt, a_el * bk, r) * cdiv(n, wt) / tiles if edge else 0.0)
    trip = chain_wait(trip, cfg, r, gp)
    reads, writes, kept = _dram_traffic(row, cfg, r, p, resident)
    tile_out = tt * wt * FP16
    res = CtaResources(int(cfg["num_warps"]), trip.load_bytes, 0.0, stages, 168)
    if sched == SCHED_DP:
        ctas, per, tiles_per, split = tiles, trips, 1, False
    elif sched == SCHED_PERSISTENT:
        ctas = min(tiles, r.sms)
        per, tiles_per, split = cdiv(tiles, ctas) * trips, cdiv(tiles, ctas), False
    elif sched == SCHED_STREAM_K:
        ctas, per, tiles_per, split, _ = _stream_k(tiles, trips, r.sms)
    else:
        raise ValueError(f"{name}: unknown schedule {sched}")
    parts = max(2, cdiv(ctas, tiles)) if split else 0
    epi = Epilogue(tiles_per * tile_out, ws_bytes=parts * tt * wt * FP32,
                   latency_ns=tiles_per * gp.tile_ns)
    work = KernelWork(trip, epi, (per,), "single", ctas, ctas, res, reads,
                      dram_write_bytes=writes, fixed_ns=gp.fixed_ns, l2_kept_stores=kept, name=name)
    return KernelPart(work, Occupancy(1, stages, False, "kernel"))


def source_hits(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams) -> float:
    """Bytes of its 16-bit input a replayed call's quantizer finds in L2: the collectors hand every
    call the same input tensor, and between two of its reads the call's quantized copy, a weight
    copy and the output pass through (memory.py `replay_hits`' rule for an input). On an L2 of one
    partition (Ada) only: the L40S TensorRT-LLM fp8 rows at M 257-8192 (1.0.0 and 1.3.0rc20, 32 /
    62 of the 400-row `stacks` samples) were +23 / +19% biased with the input read from DRAM, -4 /
    -2% with it found; on H200 (TensorRT-LLM 1.3.0rc20, 258 rows at M 257-8192) the rows whose
    8-33 MB input a partitioned L2 would hold by the weights' rule went from -2..-6% to -8..-15%
    biased with it found, and H100, B200 and SGLang's fp8 rows moved alike (ASSUMPTION: what
    stops the hits there is not known; a partitioned L2 keeps none of an output either). 0
    outside a replay (`w_copies` 0: a model's layer)."""
    if r.l2_partitions != 1:
        return 0.0
    w_bytes, quantized, y_bytes = operand_bytes(row)
    return replay_hits(int(cfg.get("w_copies", 0)), w_bytes, float(int(row["m"]) * int(row["k"]) * FP16),
                       quantized + y_bytes, r, p)[1]


def scaled_gemm_work(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams,
                     gp: ScaledGemmParams, resident: float) -> LaunchWork:
    """The launch of a scaled-GEMM row: the call's activation quantization (if any, constants
    `p.fp8_act`; its input found in L2 as `source_hits` says), the GEMM (its room's constants `gp`)."""
    return [*quant_parts(row, cfg, r, p.fp8_act, source_hits(row, cfg, r, p),
                         lambda span: cyclic_hits(span, r, p)),
            gemm_part(row, cfg, r, p, gp, resident, str(row["kernel"]))]


def room_work(field: str) -> Callable[[Mapping[str, Any], Mapping[str, int], list[int], GpuRates,
                                       SimParams, float], LaunchWork]:
    """The work builder of a scaled-GEMM room whose constants are SimParams.`field` (the rooms'
    WORK tables: cutlass_fp8, deepgemm, flashinfer_gemm, triton_fp8)."""
    def work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
             p: SimParams, resident: float) -> LaunchWork:
        return scaled_gemm_work(row, cfg, r, p, getattr(p, field), resident)

    work.__name__ = f"{field}_work"
    return work
