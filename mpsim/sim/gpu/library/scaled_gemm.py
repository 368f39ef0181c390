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
load on the chip's L2 (`edge_bytes`, SimParams.tma_edge_cost). Per-tensor / per-channel scales are
applied once in the epilogue (`tile_ns`, each room's). Schedules: a
data-parallel grid of tiles, persistent CTAs (min(tiles, SMs)) walking the tiles, or CUTLASS's
stream-K heuristic (wo_tiled.py `_stream_k`).

DRAM reads: the weight with its scales and the activation with its scales, once (tiles re-read
through L2); a benchmark's call (`w_copies` in the config: the weight copies it cycled) finds in L2
what the GPU model's replay rule says (mpsim/sim/gpu/memory.py `replay_hits`, the rule cuBLAS's rows
are priced with: all of a weight whose copies, input and output fit the L2's usable share, none
beyond its size, linear between).

Activation-quantization part (`quant` != 0, a measured framework call: mpsim/library/scaled_gemm.py
lists the modes, their kernel counts and how many token rows an SM quantizes at a time): each kernel
reads the 16-bit activations once; the quantize kernel writes them quantized with their scales.
Such kernels are latency-bound (one CTA or warp per token row, a reduction for the scale, then
the quantized store): the launch takes rounds of `round_ns` x ceil(K / 8192) (8192 values per
row iteration of 1024 threads with 16-byte loads), one round per SMs x rows-per-SM token rows, or
its bytes at the HBM rate; plus `fixed_ns` per call (ActQuantParams, SimParams.fp8_act). TensorRT-
LLM's Triton quantizer on Blackwell (QUANT_GROUP_TRITON) runs its programs along K side by side and
takes four group rounds a round; vLLM's per-token kernel takes a lone row's latency, then its rows
at the round's rate; TensorRT-LLM's per-tensor pair runs its source's grids (an amax on a fixed grid
in waves, a quantize by grid-stride passes over the elements: `amax_latency`, `quant_latency`). A
replayed call finds its input in L2 where `source_hits` says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.scaled_gemm import (
    QUANT_FP4,
    QUANT_GROUP,
    QUANT_GROUP_TRITON,
    QUANT_GROUPS_IN_TURN,
    QUANT_KERNELS,
    QUANT_NONE,
    QUANT_ROWS_PER_SM,
    QUANT_TENSOR_TRT,
    QUANT_TOKEN_SGL,
    QUANT_TOKEN_VLLM,
    QUANT_TRT_AMAX_GRID,
    QUANT_TRT_AMAX_THREADS,
    QUANT_TRT_ELEMENTS,
    SCHED_DP,
    SCHED_PERSISTENT,
    SCHED_STREAM_K,
    SM89,
    token_tiles,
)
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.library.wo_tiled import _stream_k
from mpsim.sim.gpu.memory import replay_hits, residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
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


@dataclass(frozen=True)
class ActQuantParams:
    """The activation quantization a measured fp8/fp4 call runs before its GEMM (SimParams.fp8_act,
    `--fit-params fp8_act.NAME`): one round of its latency-bound kernel per framework, and a fixed
    cost per call. Fitted on H200 rows (the small shapes, n = k in 128..512, where the GEMM is
    negligible: the growth with M gives the round, M = 1 the fixed cost), named per constant."""

    # H200 vLLM 0.24.0 fp8: 7.08 ns per row x 132 SMs x 2 rows = 1870 ns, in SM cycles at the boost
    # clock (1870 ns x 1.98 GHz): the rows' rate goes as SMs x clock on every GPU measured (fp8 less
    # bf16 at N = K = 128, M 4096-32768: H100 7.06, L40S 5.4, B200 6.4 ns a row; SMs x boost clock
    # gives 7.08 / 5.2 / 6.3 from H200's), where a round in ns priced L40S's rows 22% slow (stop 51)
    vllm_round_cycles: float = 3702.6
    # vLLM's per-token quantizer: a lone row's latency, its rows then streaming at the round's rate
    # (the H200 / H100 rows, fp8 less bf16 at N = 128: flat 2.0-2.5 us to M = 64, then 7.0 ns a
    # row to M = 32768; a whole round of 1870 ns from M = 1 left M <= 16 +9-12% biased). Fitted on
    # the even half of the CutlassFP8ScaledMMLinearKernel rows of an 800-row `stacks` sample (seed
    # 7) of h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet with the round (910 and 1920 there, the
    # round kept at 1870: odd half 12.3 -> 10.8%), then scanned against the same file's `--select
    # fp8` rows (n, k >= 2048; 2,000-row sample), where 910 moved M 17-256 9.8 -> 10.9% (bias
    # -7.6%: the small-M GEMMs of large weights lean on the quantizer's cost): 910 / 1300 / 1600
    # give 10.0 / 9.3 / 9.0% there and 9.8 / 9.8 / 10.4% on the 400-row `stacks` sample (stop 49)
    vllm_row_ns: float = 1300.0
    # fitted on H200 SGLang 0.5.14 fp8 rows (`--select fp8`, 200 sampled) with cutlass_fp8's
    # constants; the small shapes' 0.40 ns per row x 132 SMs x 32 rows gives 1690
    sgl_round_ns: float = 800.0
    # TensorRT-LLM's per-tensor quantizer (its amax waves and quantize passes, `amax_latency`,
    # `quant_latency`) and fixed cost per call: Nelder-Mead together on the even half of the
    # torch_flow fp8 rows of an 800-row `stacks` sample (seed 7) of h200_sxm/gemm/trtllm/1.3.0rc20/
    # gemm_perf.parquet, odd half 22.2 -> 7.6% from 1690 / 3000 (stop 49; before, by token rows:
    # 1690, SGLang's small-shape round, an assumption, and 3000 fitted on 200 `--select fp8` rows).
    # The round comes out near nothing: its passes are bandwidth-bound and the fixed cost holds
    # the amax grid's waves (n = k = 128: 9.1-9.6 us over bf16 from M = 1 to 16384)
    trt_round_ns: float = 22.9
    trt_fixed_ns: float = 5710.0
    # the 1x128 group quantizers' round (a warp's load, max-reduction and store of one group):
    # scanned on the fp8_block rows of H200 SGLang 0.5.14 and L40S TensorRT-LLM 1.3.0rc20 (400-row
    # `stacks` samples; all-band MAPE 13.5 / 13.6 / 13.6 / 13.7 / 16.9% and 14.0 / 14.5 / 14.7 /
    # 15.0 / 18.3% at 200 / 400 / 500 / 600 / 1690 ns, the M 1-16 bias +9.6 -> -5.0% and +16.2 ->
    # +3.6% at 400); checked on H100 / H200 TensorRT-LLM 1.3.0rc20's (16.9 -> 14.0%, 18.0 ->
    # 15.5%, DeepGEMM's current heuristic standing for their kernel then). Before: 1690, SGLang's
    # per-token small-shape round (an assumption).
    group_round_ns: float = 400.0
    fp4_round_ns: float = 1690.0      # ASSUMPTION: SGLang's per-token small-shape round (the group
    #                                   quantizers' too until stop 48)


def quant_cost(quant: int, q: ActQuantParams, boost_hz: float) -> tuple[float, float]:
    """(round ns, fixed ns per call) of an activation-quantization mode on a GPU whose boost clock
    is `boost_hz` (vLLM's round is counted in its cycles)."""
    return {QUANT_TOKEN_VLLM: (q.vllm_round_cycles / boost_hz * 1e9, 0.0),
            QUANT_TOKEN_SGL: (q.sgl_round_ns, 0.0),
            QUANT_TENSOR_TRT: (q.trt_round_ns, q.trt_fixed_ns), QUANT_GROUP: (q.group_round_ns, 0.0),
            QUANT_FP4: (q.fp4_round_ns, 0.0),
            QUANT_GROUP_TRITON: (q.group_round_ns * QUANT_GROUPS_IN_TURN[QUANT_GROUP_TRITON], 0.0)}[quant]


def elem_bytes(dtype: str) -> float:
    """Bytes per element of a GEMM operand dtype (a_dtype values, or the weight's w_bits / 8)."""
    return {"fp8-e4m3": 1.0, "fp4-e2m1": 0.5, "fp16": 2.0, "bf16": 2.0}[dtype]


def mma_dtype(fmt: str) -> str:
    return "fp4" if fmt in ("nvfp4", "mxfp4") else "fp8"


def fp4_share(fmt: str, p: SimParams) -> float:
    """The block-scaled fp4 MMAs' share of the dense fp4 rate (SimParams.fp4_mma_eta); 1 otherwise."""
    return p.fp4_mma_eta if mma_dtype(fmt) == "fp4" else 1.0


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
    a_load = tt / 2 if int(cfg.get("pair_n", 0)) else tt  # ... or the token tile
    trip = Trip(load_bytes=(a_load * a_el + w_load * w_el) * bk + _trip_scale_bytes(fmt, tt, wt, bk),
                mma_flops=2.0 * rows_mma * wt * bk, pipes=pipes, serial=True,
                mma_dtype=mma_dtype(fmt), mma_eta=gp.mma_eta * fp4_share(fmt, p),
                smem_bytes=_smem_bytes(cfg, rows_mma, wt, bk, min(a_el, w_el)), bulk=True,
                edge_bytes=edge_bytes(m, tt, a_el * bk, r) * cdiv(n, wt) / tiles if gp.tma_edge else 0.0)
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


def _rowwise(m: int, read: float, write: float, latency_ns: float, r: GpuRates, fixed_ns: float,
             name: str, dram_read: float | None = None) -> KernelPart:
    """A latency-bound row-wise kernel: `latency_ns` (its rounds), overlapping `read` bytes through
    the L2 ports, `dram_read` of them from DRAM (default all)."""
    count = max(1, min(m, r.sms))
    trip = Trip(read / count, 0.0, latency_ns=latency_ns, overlap_latency=True)
    res = CtaResources(8, 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(write / count), (1,), "single", count, count, res,
                      read if dram_read is None else dram_read, dram_write_bytes=write,
                      fixed_ns=fixed_ns, name=name)
    return one_part(work)[0]


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


def quant_latency(quant: int, m: int, k: int, q: ActQuantParams, r: GpuRates) -> float:
    """The quantize kernel's latency: rounds of its round (quant_cost), each over SMs x
    QUANT_ROWS_PER_SM token rows and K in 8192-value steps (the Triton group quantizer's programs
    along K run side by side: no K factor); vLLM's per-token kernel its lone row's latency, then
    its rows at the round's rate; TensorRT-LLM's per-tensor one a round per pass of its
    grid-stride threads over the elements (QUANT_TRT_ELEMENTS a thread a pass)."""
    round_ns = quant_cost(quant, q, r.boost_hz)[0]
    if quant == QUANT_TENSOR_TRT:
        threads = r.sms * r.max_warps * 32
        return max(1.0, m * k / (threads * QUANT_TRT_ELEMENTS)) * round_ns
    if quant not in QUANT_GROUPS_IN_TURN:
        round_ns *= cdiv(k, 8192)
    rows = r.sms * QUANT_ROWS_PER_SM[quant]
    if quant == QUANT_TOKEN_VLLM:
        return q.vllm_row_ns + m / rows * round_ns
    return max(1.0, m / rows) * round_ns


def amax_latency(q: ActQuantParams, r: GpuRates) -> float:
    """TensorRT-LLM's per-tensor amax: its fixed grid of 1024-thread CTAs (QUANT_TRT_AMAX_GRID) in
    waves of the CTAs an SM holds by threads, a round each (a grid-stride max, a block reduction,
    one atomic)."""
    per_sm = max(1, r.max_warps * 32 // QUANT_TRT_AMAX_THREADS)
    return cdiv(QUANT_TRT_AMAX_GRID, r.sms * per_sm) * q.trt_round_ns


def quant_parts(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates,
                q: ActQuantParams, src_hit: float = 0.0) -> LaunchWork:
    """The activation quantization the measured call ran before the GEMM (none for QUANT_NONE);
    `src_hit`: bytes of its input each kernel finds in L2 (`source_hits`)."""
    quant = int(cfg.get("quant", QUANT_NONE))
    if quant == QUANT_NONE:
        return []
    m, k = int(row["m"]), int(row["k"])
    src = float(m * k * FP16)
    grouped = quant in (QUANT_GROUP, QUANT_GROUP_TRITON)
    out = float(activation_bytes(m, k, "fp4-e2m1" if quant == QUANT_FP4 else "fp8-e4m3",
                                 "fp8-block" if grouped else str(row["w_format"])))
    dram = src - min(src, src_hit)
    parts = [_rowwise(m, src, out, quant_latency(quant, m, k, q, r), r, 0.0, "act quant", dram)]
    if QUANT_KERNELS[quant] == 2:  # an amax reduction first (TensorRT-LLM's per-tensor scale)
        parts.insert(0, _rowwise(m, src, 0.0, amax_latency(q, r), r, 0.0, "act amax", dram))
    parts[0] = KernelPart(replace(parts[0].work, fixed_ns=quant_cost(quant, q, r.boost_hz)[1]),
                          parts[0].occupancy)
    return parts


def scaled_gemm_work(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates, p: SimParams,
                     gp: ScaledGemmParams, resident: float) -> LaunchWork:
    """The launch of a scaled-GEMM row: the call's activation quantization (if any, constants
    `p.fp8_act`; its input found in L2 as `source_hits` says), the GEMM (its room's constants `gp`)."""
    return [*quant_parts(row, cfg, r, p.fp8_act, source_hits(row, cfg, r, p)),
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
