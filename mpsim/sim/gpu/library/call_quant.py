"""The activation quantization a measured fp8/fp4 call runs before its scaled GEMM, as kernels
(scaled_gemm.py `scaled_gemm_work` puts them first; none for a model's own launch, whose policy
quantizes in a launch of its own).

The parts (`quant` != 0, a measured framework call: mpsim/library/scaled_gemm.py lists the modes,
their kernel counts and how many token rows an SM quantizes at a time): each kernel reads the
16-bit activations once (SGLang's per-token kernel twice, the second read missing L2 once its rows
in flight outgrow it); the quantize kernel writes them quantized with their scales. Such kernels
are latency-bound (one CTA or warp per token row, a reduction for the scale, then the quantized
store): the launch takes rounds of `round_ns` x ceil(K / 8192) (an assumption: 8192 values per row
iteration of 1024 threads with 16-byte loads; vLLM's and SGLang's quantizers follow their sources,
below),
one round per SMs x rows-per-SM token rows, or its bytes at the
HBM rate; plus `fixed_ns` per call (ActQuantParams, SimParams.fp8_act). TensorRT-LLM's Triton
quantizer on Blackwell (QUANT_GROUP_TRITON) runs its programs along K side by side and takes four
group rounds a round; vLLM's per-token kernel takes a lone row's latency, then its rows at the
round's rate, a round growing by a pass per 2048 values of K (256 threads, 16-byte vectors); vLLM's
group kernel rounds over SMs x 8 CTAs x 16 groups whatever the rows; SGLang's per-token kernel
is a CTA a token below SMs x 16 tokens (vLLM's shape, 4096 values a pass) and a warp a token from
there (`sgl_token_latency`); TensorRT-LLM's per-tensor
pair runs its source's grids (an amax on a fixed grid in waves, a quantize by grid-stride passes
over the elements: `amax_latency`, `quant_latency`). A replayed call finds its input in L2 where
scaled_gemm.py `source_hits` says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.scaled_gemm import (
    QUANT_FP4,
    QUANT_GROUP,
    QUANT_GROUP_MODES,
    QUANT_GROUP_TRITON,
    QUANT_GROUP_TRT,
    QUANT_GROUP_VLLM,
    QUANT_GROUPS_IN_TURN,
    QUANT_KERNELS,
    QUANT_NONE,
    QUANT_ROWS_PER_SM,
    QUANT_SGL_PASS_VALUES,
    QUANT_SGL_WARP_FROM,
    QUANT_SGL_WARP_PASS_VALUES,
    QUANT_SGL_WARP_ROWS_PER_SM,
    QUANT_TENSOR_TRT,
    QUANT_TOKEN_SGL,
    QUANT_TOKEN_VLLM,
    QUANT_TRT_AMAX_GRID,
    QUANT_TRT_AMAX_THREADS,
    QUANT_TRT_ELEMENTS,
    QUANT_VLLM_GROUPS_PER_CTA,
    QUANT_VLLM_PASS_VALUES,
)
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16, activation_bytes


@dataclass(frozen=True)
class ActQuantParams:
    """The activation quantization a measured fp8/fp4 call runs before its GEMM (SimParams.fp8_act,
    `--fit-params fp8_act.NAME`): one round of its latency-bound kernel per framework, and a fixed
    cost per call. Fitted on H200 rows (the small shapes, n = k in 128..512, where the GEMM is
    negligible: the growth with M gives the round, M = 1 the fixed cost), named per constant."""

    # vLLM's per-token round (SMs x 8 rows: 256-thread CTAs) is `vllm_round_cycles` plus
    # `vllm_pass_cycles` per 2048 values of K (QUANT_VLLM_PASS_VALUES), in SM cycles at the boost
    # clock: the rows' rate goes as SMs x clock on every GPU measured (fp8 less bf16 at N = K = 128,
    # M 4096-32768: H200 7.08, H100 7.06, L40S 5.4, B200 6.4 ns a row; SMs x boost clock gives
    # 7.08 / 5.2 / 6.3 from H200's), where a round in ns priced L40S's rows 22% slow (stop 51).
    # Both fitted together (stop 53) on the even half of the H200 vLLM 0.24.0 fp8 rows at N = 128,
    # M >= 64 (1,166 rows, every K from 32 to 65536; h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet),
    # where the quantizer is most of the call: 6800 / 7800 give 3.4% on both halves (bias +2.7% at
    # K <= 2048, +0.4% above 16384); the one round of 3703 cycles a 2 rows-per-SM round before
    # (K in steps of 8192, an assumption) gave 13.5 / 12.0%, -22% at K 4097-8192; 7300 / 7500 and
    # 6300 / 7800 give 3.7 / 3.9%. The pass alone carries the steps the rows take at K = 2049,
    # 4097, ... (H200 at M 16384: 7.2 / 10.4 / 14.0 / 18.0 / 32 ns a row at K 2048 / 4096 / 6144 /
    # 8192 / 16384).
    vllm_round_cycles: float = 6800.0
    vllm_pass_cycles: float = 7800.0
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
    # SGLang's per-token quantizer (QUANT_TOKEN_SGL), in SM cycles at the boost clock as vLLM's:
    # below SMs x 16 tokens its CTA-a-token kernel, a lone row's latency `sgl_row_ns` then rounds
    # of SMs x 8 rows of `sgl_round_cycles` + `sgl_pass_cycles` per 4096 values of K; from there its
    # warp-a-token kernel, at least one round of SMs x 64 rows, each `sgl_warp_round_cycles` +
    # `sgl_warp_pass_cycles` per 512 values. Fitted (stop 54) on the even half of the H200 SGLang
    # 0.5.14 fp8 rows at N = 128, M >= 64 (h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet; sorted by
    # M, K), where the quantizer is most of the call, each form on its own rows: the CTA kernel's 352
    # of 704 rows (M 64-2111) 9.2% (odd 10.0; 9.5 / 10.2 at fp8_tensor_energy 1.0, the fit having
    # run at 1.15; 6800 / 7800 / 1300, vLLM's, give 30.7%, +117% at M
    # 1025-2111, K <= 512: SGLang's rounds are far shorter; a flat minimum, 9.2-9.6% from 500 to
    # 2000 cycles), the warp kernel's 231 of 462 (M >= 2112) 9.6% (odd 11.2; 1000 / 2500 / 3000 /
    # 3500 / 4800 pass cycles at a round of 1000: 10.9 / 9.9 / 9.6 / 13.9%), K > 8192 left +10..+12%
    # there (its bytes: both reads from DRAM at the streaming rates, below); before, one round of 800
    # ns per 32 rows an SM (an assumption) gave 14.0% on all 1,166, -8.8% biased (-15..-30% from M
    # 257 up); now 9.6 / 10.6% on the halves. The `--select fp8` rows (N >= 2048) want a costlier
    # lone row (1600 / 4000 / 4000 fitted there: M 17-256 12.8 -> 10.1%), the N = 128 rows then
    # +16.6% and an every-shape sample 10.0 -> 12.6%: SGLang's GEMM is not vLLM's dispatch, which
    # stands for it (mpsim/library/cutlass_fp8.py), and no quantizer constant mends that.
    sgl_row_ns: float = 600.0
    sgl_round_cycles: float = 2000.0
    sgl_pass_cycles: float = 1000.0
    sgl_warp_round_cycles: float = 1000.0
    sgl_warp_pass_cycles: float = 3500.0
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
    # vLLM's own 1x128 quantizer (QUANT_GROUP_VLLM): a round over SMs x 8 CTAs of 16 groups.
    # Fitted (stop 53) on the even half of the H200 vLLM 0.24.0 fp8_block rows at N = 128, M >= 64
    # (1,166 rows, K 32-65536; h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet), where the call is host
    # time (88 us) or the quantizer: 400 (the generic round it took before) / 3000 / 4000 / 5000 /
    # 5500 / 6000 give 10.8 / 8.8 / 6.7 / 5.1 / 5.9 / 7.1% (odd half 9.6 -> 5.3% at 5000; bias at
    # K > 16384 -33.7 -> +1.0%); H100's rows, not fitted, 10.9 / 9.8 -> 6.4 / 6.2% on the halves
    vllm_group_round_ns: float = 5000.0
    # TensorRT-LLM's 1x128 quantizer (QUANT_GROUP_TRT): an iteration of its grid-stride warps takes
    # `trt_group_iter_ns` plus `trt_group_busy_ns` times the share of its SMs x 64 warps that load
    # (a full grid: SMs x 64 x 256 B read, 128 B written). The first is the generic group round
    # (`group_round_ns`, set on small-M rows at stop 48); the second fitted (stop 53) on the even
    # half of the H200 TensorRT-LLM 1.3.0rc20 fp8_block rows at N = 128, M >= 64 (1,059 rows; h200_sxm/
    # gemm/trtllm/1.3.0rc20/gemm_perf.parquet): 900 / 1100 / 1300 / 1400 / 1500 give 11.4 (at 500)
    # / 10.4 / 10.6 / 11.9 / 13.8%, 18.2% with the generic round (bias -20% at K > 16384 -> -2.8%);
    # odd half 18.6 -> 10.7%. Rows at M 129-257 stay +15..+25% there: the swap-AB GEMM's, not this
    trt_group_iter_ns: float = 400.0
    trt_group_busy_ns: float = 1100.0
    fp4_round_ns: float = 1690.0      # ASSUMPTION: SGLang's per-token small-shape round (the group
    #                                   quantizers' too until stop 48)


def quant_cost(quant: int, q: ActQuantParams, boost_hz: float) -> tuple[float, float]:
    """(round ns, fixed ns per call) of an activation-quantization mode on a GPU whose boost clock
    is `boost_hz` (vLLM's round is counted in its cycles)."""
    return {QUANT_TOKEN_VLLM: (q.vllm_round_cycles / boost_hz * 1e9, 0.0),
            QUANT_TOKEN_SGL: (q.sgl_round_cycles / boost_hz * 1e9, 0.0),
            QUANT_TENSOR_TRT: (q.trt_round_ns, q.trt_fixed_ns), QUANT_GROUP: (q.group_round_ns, 0.0),
            QUANT_FP4: (q.fp4_round_ns, 0.0),
            QUANT_GROUP_TRITON: (q.group_round_ns * QUANT_GROUPS_IN_TURN[QUANT_GROUP_TRITON], 0.0),
            QUANT_GROUP_VLLM: (q.vllm_group_round_ns, 0.0),
            QUANT_GROUP_TRT: (q.trt_group_iter_ns, 0.0)}[quant]



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


def quant_latency(quant: int, m: int, k: int, q: ActQuantParams, r: GpuRates) -> float:
    """The quantize kernel's latency: rounds of its round (quant_cost), each over SMs x
    QUANT_ROWS_PER_SM token rows and K in 8192-value steps (the Triton group quantizer's programs
    along K run side by side: no K factor); vLLM's per-token kernel its lone row's latency, then
    its rows at the round's rate (SMs x 8 rows, a pass per 2048 values of K on top of the round);
    vLLM's group kernel a round per SMs x 8 CTAs x 16 groups; TensorRT-LLM's per-tensor one a round
    per pass of its grid-stride threads over the elements (QUANT_TRT_ELEMENTS a thread a pass)."""
    round_ns = quant_cost(quant, q, r.boost_hz)[0]
    if quant == QUANT_TENSOR_TRT:
        threads = r.sms * r.max_warps * 32
        return max(1.0, m * k / (threads * QUANT_TRT_ELEMENTS)) * round_ns
    rows = r.sms * QUANT_ROWS_PER_SM[quant]  # the group kernels' CTAs / warps, not rows
    if quant == QUANT_GROUP_TRT:  # a warp a group a grid-stride iteration over SMs x 64 warps
        groups, warps = m * cdiv(k, 128), rows
        return cdiv(groups, warps) * (round_ns + min(groups, warps) / warps * q.trt_group_busy_ns)
    if quant == QUANT_GROUP_VLLM:  # a round: SMs x 8 CTAs of QUANT_VLLM_GROUPS_PER_CTA groups
        return max(1.0, m * cdiv(k, 128) / (rows * QUANT_VLLM_GROUPS_PER_CTA)) * round_ns
    if quant == QUANT_TOKEN_VLLM:
        return per_token_ctas(m, k, r, q.vllm_row_ns, q.vllm_round_cycles, q.vllm_pass_cycles,
                              QUANT_VLLM_PASS_VALUES, QUANT_ROWS_PER_SM[QUANT_TOKEN_VLLM])
    if quant == QUANT_TOKEN_SGL:
        return sgl_token_latency(m, k, q, r)
    if quant not in QUANT_GROUPS_IN_TURN:
        round_ns *= cdiv(k, 8192)
    return max(1.0, m / rows) * round_ns


def per_token_ctas(m: int, k: int, r: GpuRates, row_ns: float, round_cycles: float,
                   pass_cycles: float, pass_values: int, rows_per_sm: int) -> float:
    """A CTA-a-token quantizer (vLLM's, SGLang's below its warp form): a lone row's latency, then
    its rows at the rate of a round over SMs x `rows_per_sm` rows (a partial round costing its
    share), a round `round_cycles` plus `pass_cycles` per `pass_values` values of K, in cycles at
    the boost clock."""
    per_round = (round_cycles + cdiv(k, pass_values) * pass_cycles) * 1e9 / r.boost_hz
    return row_ns + m / (r.sms * rows_per_sm) * per_round


def sgl_warp_form(m: int, r: GpuRates) -> bool:
    """Whether SGLang's per-token quantizer runs its warp-a-token kernel (from SMs x 16 tokens)."""
    return m >= r.sms * QUANT_SGL_WARP_FROM


def sgl_token_latency(m: int, k: int, q: ActQuantParams, r: GpuRates) -> float:
    """SGLang's per-token quantizer by its two forms (QUANT_TOKEN_SGL): a CTA a token below SMs x 16
    tokens (`per_token_ctas`: rounds of SMs x 8 rows, a pass per 4096 values), a warp a token from
    there (at least a round; rounds of SMs x 64 rows, a pass per 512 values); cycles at the boost
    clock."""
    if not sgl_warp_form(m, r):
        return per_token_ctas(m, k, r, q.sgl_row_ns, q.sgl_round_cycles, q.sgl_pass_cycles,
                              QUANT_SGL_PASS_VALUES, QUANT_ROWS_PER_SM[QUANT_TOKEN_SGL])
    passes = cdiv(k, QUANT_SGL_WARP_PASS_VALUES)
    per_round = (q.sgl_warp_round_cycles + passes * q.sgl_warp_pass_cycles) * 1e9 / r.boost_hz
    return max(1.0, m / (r.sms * QUANT_SGL_WARP_ROWS_PER_SM)) * per_round


def amax_latency(q: ActQuantParams, r: GpuRates) -> float:
    """TensorRT-LLM's per-tensor amax: its fixed grid of 1024-thread CTAs (QUANT_TRT_AMAX_GRID) in
    waves of the CTAs an SM holds by threads, a round each (a grid-stride max, a block reduction,
    one atomic)."""
    per_sm = max(1, r.max_warps * 32 // QUANT_TRT_AMAX_THREADS)
    return cdiv(QUANT_TRT_AMAX_GRID, r.sms * per_sm) * q.trt_round_ns


def sgl_rows_in_flight(m: int, k: int, r: GpuRates) -> float:
    """Bytes of the 16-bit rows SGLang's quantizer holds in flight (SMs x 8 or SMs x 64 rows by its
    form, QUANT_TOKEN_SGL): each form reads a row twice, the second read finding it in L2 only as a
    cyclic stream of this span does (memory.py `cyclic_hits`)."""
    per_sm = QUANT_SGL_WARP_ROWS_PER_SM if sgl_warp_form(m, r) else QUANT_ROWS_PER_SM[QUANT_TOKEN_SGL]
    return float(min(m, r.sms * per_sm) * k * FP16)


def quant_parts(row: Mapping[str, Any], cfg: Mapping[str, int], r: GpuRates,
                q: ActQuantParams, src_hit: float = 0.0,
                found: Callable[[float], float] | None = None) -> LaunchWork:
    """The activation quantization the measured call ran before the GEMM (none for QUANT_NONE);
    `src_hit`: bytes of its input each kernel finds in L2 (`source_hits`); `found`: the bytes of a
    span read twice that the second read finds in L2 (memory.py `cyclic_hits`; SGLang's quantizer
    reads its rows twice: all found when not given)."""
    quant = int(cfg.get("quant", QUANT_NONE))
    if quant == QUANT_NONE:
        return []
    m, k = int(row["m"]), int(row["k"])
    src = float(m * k * FP16)
    grouped = quant in QUANT_GROUP_MODES
    out = float(activation_bytes(m, k, "fp4-e2m1" if quant == QUANT_FP4 else "fp8-e4m3",
                                 "fp8-block" if grouped else str(row["w_format"])))
    dram = src - min(src, src_hit)
    read = src
    if quant == QUANT_TOKEN_SGL:  # the quantize pass reads the row again
        span = sgl_rows_in_flight(m, k, r)
        missed = 1.0 - (found(span) if found is not None else span) / span
        read, dram = 2 * src, dram + src * missed
    parts = [_rowwise(m, read, out, quant_latency(quant, m, k, q, r), r, 0.0, "act quant", dram)]
    if QUANT_KERNELS[quant] == 2:  # an amax reduction first (TensorRT-LLM's per-tensor scale)
        parts.insert(0, _rowwise(m, src, 0.0, amax_latency(q, r), r, 0.0, "act amax", dram))
    parts[0] = KernelPart(replace(parts[0].work, fixed_ns=quant_cost(quant, q, r.boost_hz)[1]),
                          parts[0].occupancy)
    return parts


