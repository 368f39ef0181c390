"""TensorRT-LLM's weight-only batched GEMV (`trtllm_wo_gemv` rows) as CTA work (name, config and row
builder: mpsim/library/trtllm.py); its CUTLASS fpA_intB GEMM (m >= 5): trtllm_fpaintb.py.

Row: op gemm, m 1..15, w_format int4-group / int8-group with group_size = k (per-channel scales);
config `trtllm_wo_config`.

cpp/tensorrt_llm/kernels/weightOnlyBatchedGemv (M < 16, per-channel scales, fp16 activations):
CTAs of 128 threads over `block_n` = 8 x kInterleave weight rows; every CTA walks all of K in
I = ceil(K / block_k) steps of 128 threads x kStepK interleaved weights (the layout by SM version:
mpsim/library/trtllm.py `gemv_layout`). On sm_90 (ColumnMajorInterleavedForHopper) a step is
128 x 128 / bits weights of 8 rows (int4 4096, int8 2048), 16 KiB either way; before Hopper
(ColumnMajorInterleaved, 4 int4 or 2 int8 rows interleaved) a CTA covers 32 or 16 rows and walks
4 or 2 times as many steps of the same 16 KiB, so a GEMV runs a quarter or half as many CTAs.
A step issues its loads, waits for them (`wo_lat_ns`, not pipelined across steps), then
dequantizes and multiplies on the fp32 lanes (`wo_ops_dq4/8` + M x `wo_ops_fma` lane-ops per
weight). An SM holds up to 16 CTAs; the co-resident CTAs are separate processes, so one's load
overlaps another's math and their math shares the SM's lanes: a step costs max(latency + math,
R x math). Each CTA pays `wo_cta_ns` outside its loop (`sm80_wo_cta_ns` in the pre-Hopper build,
config `sm80`; sm_100's ColumnMajor build takes the Hopper one, an assumption: no rows).
Constants: TrtllmParams, SimParams.trtllm (wo rows; not from SASS: no TensorRT-LLM build here).
The attention op's kernels (XQA, MMHA, context FMHA): trtllm_attention.py, constants in the same
TrtllmParams.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.trtllm import TRTLLM_AWQ_PRESCALE, TRTLLM_FPAINTB, TRTLLM_WO_GEMV
from mpsim.sim.gpu.library.trtllm_attention import WORK as ATTENTION_WORK
from mpsim.sim.gpu.library.trtllm_fpaintb import fpaintb_work, prescale_work
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class TrtllmParams:
    """TensorRT-LLM weight-only batched GEMV, sm90 path (wo rows); SimParams.trtllm (`--fit-params
    trtllm.NAME`). Where a value came from: mpsim/sim/params.py's docstring names the row sets."""

    wo_lat_ns: float = 356.9             # one K step's dependent global load
    wo_ops_dq4: float = 3.640            # CUDA-core lane-ops per int4 weight (fitted, see docs)
    wo_ops_dq8: float = 6.028            # per int8 weight (fitted; not from SASS: no TRT-LLM build)
    wo_ops_fma: float = 1.170            # per weight per activation row
    wo_cta_ns: float = 4239.0            # per CTA outside the K loop
    wo_scope_us: float = 0.0             # anything the profiler adds beyond the protocol's cost
    # CUTLASS fpA_intB GEMM (trtllm_fpaintb.py), refitted at stop 40 (with the turnstile fix-up
    # and the GEMV as a profiled tactic below M = 16) on the fit half of the H200 1.2.0rc5
    # int4_wo/int8_wo rows with m >= 5: 80 rows per dtype and M band, seed 0, Nelder-Mead on the
    # mean band MAPE (docs/kernels-weight-only.md)
    fpaintb_cpi: float = 8.54            # cycles per dependent convert instruction of a warp
    fpaintb_mma_wait_cycles: float = 196.7  # per K trip: MMA issue to wait, pipeline barriers
    fpaintb_mma_token_cycles: float = 1.07  # per K trip and token of the tile
    fpaintb_tile_ns: float = 995.0       # per output tile, not hidden (prologue fill, epilogue)
    fpaintb_fixed_ns: float = 4305.0     # per profiled layer beyond the floor and the protocol's cost
    fpaintb_fixup_ns: float = 1134.0     # one turnstile step of a split tile (wait, add, signal)
    # ---- the pre-Hopper builds (sm_75..89 and sm_100+ run fpA_intB's CUTLASS 2 mma.sync tiles, sm_75..89
    # and sm_120 the GEMV's ColumnMajorInterleaved layout; mpsim/library/trtllm.py): other kernels
    # than the Hopper ones above, with their own fixed costs and loop latencies. Fitted on the only
    # pre-Hopper rows published (L40S, TRT-LLM 1.0.0 int4_wo/int8_wo, TensorRT profiler), the fit
    # half of the shapes (wo_bands `--half fit`, seed 1): the GEMV's CTA cost by a scan on its M <= 4
    # rows (60 per dtype; 8.6% mean from 1150 to 1300 ns, 25.9% at the Hopper value), the five
    # fpA_intB ones by Nelder-Mead on its M >= 17 rows (25 per dtype and band: 16.4 -> 13.5% mean
    # band MAPE from the Hopper values). One kernel build on one device: A100 takes them untested
    # (docs/kernels-weight-only.md#tensorrt-llm-before-hopper)
    sm80_wo_cta_ns: float = 1250.0         # the GEMV per CTA outside its K loop
    sm80_fpaintb_cpi: float = 4.564        # cycles per dependent convert instruction of a warp
    sm80_fpaintb_mma_wait_cycles: float = 253.7  # per K trip: mma.sync issue to wait, cp.async barrier
    sm80_fpaintb_mma_token_cycles: float = 2.499  # per K trip and token of the tile
    sm80_fpaintb_tile_ns: float = 618.6    # per output tile, not hidden
    sm80_fpaintb_fixed_ns: float = 641.6   # per profiled layer beyond the floor and the protocol's cost
    # ---- the attention op (trtllm_attention.py): fitted on TRT-LLM 1.3.0rc20 H200 rows (stratified
    # samples of h200_sxm/attention/trtllm/1.3.0rc20, seed 23), checked on H100's (docs/validation.md)
    # gmma_trip_ns, gmma_cta_ns, xqa_combine_us refitted (issue 23, stop 31, with the multi-block
    # history = kv_len) on 140 GMMA rows of the stratified 1600-row H200 generation sample; the fit's
    # xqa_head_ns (90.7) was not taken: it worsened the HMMA rows, which share it
    xqa_softmax_ops: float = 12.16     # fp32 lane-ops per score, padded query rows included
    gmma_trip_ns: float = 530.1       # GMMA kernel, per 64-key tile: page lookup + dependent load
    gmma_cta_ns: float = 17.76       # GMMA kernel, per CTA: Q load and RoPE, KV append, O write
    # HMMA kernel (mha.cu): 256-key CTA tiles, one CTA an SM at a time (HMMA_RESIDENT); refitted
    # (issue 23, stop 31) on 140 HMMA rows of a stratified 1600-row sample of
    # h200_sxm/attention/trtllm/1.3.0rc20/generation_attention_perf.parquet (seed 23), checked on
    # h100_sxm's table of the same version (docs/validation.md "TRT-LLM attention on Hopper")
    hmma_trip_ns: float = 973.5      # HMMA kernel, per 256-key CTA tile
    hmma_cta_ns: float = 2219.0       # HMMA kernel, per CTA: Q load, O write
    hmma_combine_us: float = 3.796    # HMMA multi-block: the last CTA's merge of the partial outputs
    # a binding sliding window (stop 44): Nelder-Mead on MAPE over the even half of 800 binding-
    # window bf16-cache rows of h200_sxm/attention/trtllm/1.3.0rc20/generation_attention_perf.parquet
    # (seed 7): 13.6 -> 12.0% (odd half 13.5 -> 12.1%); docs/validation.md#sliding-window-attention-stop-44
    hmma_idle_split: float = 0.657       # a window's HMMA split with no tile in it, as a share of a CTA
    xqa_head_ns: float = 68.27        # per CTA per query head of the group (x head_dim / 128):
    #                                   Q load and RoPE, the output's conversion and store
    xqa_combine_us: float = 2.412      # GMMA multi-block: the last CTA's merge of the partials
    xqa_scope_us: float = 2.951        # the op's host-side metadata / launches inside the graph
    xqa_prep_us: float = 0.0          # HMMA path: the QKV-preprocessing kernel (RoPE + KV append)
    # MMHA (block size by mmha_threads, tiles ceil((kv_len + 1) / loop) since stop 39): the six mmha_*
    # refitted (issue 23, stop 31) on 180 MMHA rows
    # (bf16 and fp8 caches) of the stratified 1600-row H200 generation sample; checked on h100_sxm.
    # Stop 39 kept them: refitted with its tile rule, idle warps and 512-thread residency (200 of 400
    # H200 MMHA rows, seed 23) they gave 9.9% on those and 10.3% on the other 200 (10.6 / 10.7 with
    # these), 12.4% on 400 H100 MMHA rows (12.5), but the H100 classes' bias rose 2 points
    mmha_ops: float = 2.790             # fp32 lane-ops per K or V element per query head
    mmha_fp8_ops: float = 4.578        # extra lane-ops per e4m3 element: its conversion
    mmha_trip_ns: float = 863.3       # per key loop of a CTA: dependent loads
    mmha_cta_ns: float = 1073.0       # per CTA: Q load, RoPE, KV append, O write
    mmha_combine_us: float = 6.346      # multi-block: reduction of the tiles' partials
    mmha_scope_us: float = 2.561        # the op's fixed cost
    # context FMHA: fmha_eta, fmha_fp8_eta, fmha_tile_ns, fmha_row_ns, fmha_scope_us refitted
    # (issue 23, stop 38, once the QKV preprocessing covered every query head, prep_round_ns held)
    # on 300 rows (100 a class: prefill, FP8 FMHA, fp8 cache; seed 23, the even half of a 600-row
    # draw) of h200_sxm/attention/trtllm/1.3.0rc20/context_attention_perf.parquet; checked on the
    # other 300 and on 600 h100_sxm rows (docs/validation.md "TRT-LLM attention on Hopper")
    fmha_eta: float = 0.6248            # share of the tensor peak of the causal main loop (bf16)
    # its masked edge tiles under a binding sliding window (stop 44): Nelder-Mead on the even half of
    # 800 binding-window bf16 rows of h200_sxm/attention/trtllm/1.3.0rc20/context_attention_perf
    # .parquet (seed 7): 10.8 -> 7.2% (odd half 11.5 -> 7.9%)
    fmha_window_eta: float = 0.3745     # share of the tensor peak of a window's two edge tiles (bf16)
    fmha_fp8_eta: float = 0.4421         # the same for the FP8 FMHA (share of the fp8 peak)
    # the FP8 FMHA under a binding window (stop 57): its rows run 1.33x the bf16 windowed FMHA at
    # head_dim 64, 1.08x at 192 (median, isl >= 1024, H200), a cost per masked score, not a share of
    # the tensor peak (one edge-tile eta for fp8: 13.2% at best, head_dim 192 +42%). MAPE scan (10-60)
    # on the even half of 800 binding-window rows (fp8 compute and fp8 cache, seed 7) of
    # h200_sxm/attention/trtllm/1.3.0rc20/context_attention_perf.parquet: 8.7% at 42-43, 8.8% at 44
    # (bias -3.3 against -4.0; none: 34.5%); odd half 8.9%, 800 h100_sxm rows 10.0% (none: 34.1%)
    fmha_fp8_mask_ops: float = 44.0     # fp32 lane-ops per score of an FP8 window's two edge tiles
    fmha_tile_ns: float = 2145.0      # per query-tile CTA: prologue and epilogue
    fmha_row_ns: float = 29.29         # per query row of a tile: Q load, O normalization and store
    fmha_scope_us: float = 5.947        # the op's fixed cost (metadata, launches)
    # fitted at stop 29 on a 300-row H200 context sample with one block per token; kept at stop 38
    # (the H200 context rows cannot tell it from fmha_row_ns, both growing with tokens x query heads:
    # fitted together, 949 ns and 34.3 ns at the same held-out MAPE)
    prep_round_ns: float = 1416.0     # QKV preprocessing (RoPE + KV append): one round of blocks
    # ---- the op on Ada (trtllm_sm89.py): fmha_v2's sm_89 context kernels and XQA's HMMA kernel over
    # an e4m3 cache; each fitted on the even half of a 1,200-row `--select stacks` sample of the L40S
    # TRT-LLM 1.3.0rc20 tables (bf16 FMHA, FP8 FMHA, fp8-cache XQA and MMHA rows apart), the odd half
    # checked (docs/validation.md#trtllm-attention-on-ada); one kernel on one device each
    sm89_fmha_eta: float = 0.6339       # share of the mma.sync peak of the bf16 context main loop
    sm89_fmha_fp8_wide_eta: float = 0.250  # the FP8 FMHA's 128 x 128 kernels (head_dim <= 64)
    # the FP8 FMHA's 64-row kernels (fp8 peak; was 0.515 with head_dim 256 among them) and its
    # head_dim-256 builds apart (setup.py's limited QK / V fragments and no ldgsts: the config's
    # `sync_loads`; the L40S rows take 6.3x the head-128 kernel's time at 2x its FLOPs at isl >
    # 8192, 1.6-1.9x the bf16 tiled kernel's): Nelder-Mead together on the even half of the FP8
    # FMHA rows of a 1,200-row `stacks` sample (seed 7) of l40s/attention/trtllm/1.3.0rc20/
    # context_attention_perf.parquet, 24.5 -> 17.2% (odd half 25.3 -> 17.5%; stop 49)
    sm89_fmha_fp8_eta: float = 0.5778
    sm89_fmha_fp8_limited_eta: float = 0.162
    sm89_fmha_scope_us: float = 2.630   # the op's fixed cost on Ada beyond its 2 kernels' launches
    sm89_fmha_tile_ns: float = 389.9    # per query-tile CTA: prologue and epilogue
    sm89_softmax_ops: float = 7.462     # fp32 lane-ops per score: FA2's (FA3's count), not fitted
    sm89_mmha_fp8_cta_ns: float = 8376.0  # MMHA over an e4m3 cache on sm_89: per CTA (trtllm_sm89.py)
    # XQA's HMMA kernel built for sm_89 (mha.cu `__launch_bounds__(256, nbCtaPerSM)`, 1 an SM there,
    # 2 on sm_90): its per-CTA cost, per-tile latency and e4m3 conversion, fitted together (stop 46)
    # by Nelder-Mead on the even half of the 660 XQA rows (bf16 and e4m3 caches) of a 1,200-row
    # `--select stacks` sample of the L40S TRT-LLM 1.3.0rc20 generation table: 19.6 -> 8.3% from
    # the H200 HMMA values (odd half 21.5 -> 10.3%). The fit puts the whole per-CTA cost in the
    # per-tile latency (the two trade along a ridge: 500 / 1300 ns gives 9.4 / 11.2%): with one CTA
    # an SM the Q load overlaps the first tile's loads, an assumption; one kernel build on one device
    hmma_fp8_cvt: float = 2.02          # XQA HMMA: conversion-pipe ops per e4m3 K/V element (was 1.63)
    sm89_hmma_cta_ns: float = 0.0       # per CTA outside its tiles (H200's HMMA build: 2219)
    sm89_hmma_trip_ns: float = 1854.0   # per 256-key CTA tile (H200's HMMA build: 973.5)


MAX_CTAS_PER_SM = 16


def trtllm_wo_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    m, n, k, bits = int(row["m"]), int(row["n"]), int(row["k"]), int(row["w_bits"])
    cta_k, rows = int(cfg["block_k"]), int(cfg["block_n"])
    iters = cdiv(k, cta_k)
    ctas = max(1, n // rows)
    per_sm = min(MAX_CTAS_PER_SM, cdiv(ctas, r.sms))
    w_it = rows * k / iters
    ops = (p.trtllm.wo_ops_dq4 if bits == 4 else p.trtllm.wo_ops_dq8) + m * p.trtllm.wo_ops_fma
    trip = Trip(load_bytes=w_it * bits / 8 + m * k / iters * FP16, mma_flops=0.0,
                pipes={"fp32": w_it * ops}, latency_ns=p.trtllm.wo_lat_ns, overlap_latency=True)
    reads = n * k * bits / 8 + n * 2 * FP16 + m * k * FP16
    res = CtaResources(4, 0.0, 0.0, 1, 64)
    work = KernelWork(trip, Epilogue(m * rows * FP16), (iters,), "single", ctas, ctas, res, reads,
                      setup_ns=p.trtllm.sm80_wo_cta_ns if cfg.get("sm80") else p.trtllm.wo_cta_ns,
                      fixed_ns=p.trtllm.wo_scope_us * 1e3, resident_split=per_sm,
                      name="trtllm wo gemv")
    return [KernelPart(work, Occupancy(per_sm, 1, False, "kernel"))]


WORK = {TRTLLM_WO_GEMV: trtllm_wo_work, TRTLLM_FPAINTB: fpaintb_work,
        TRTLLM_AWQ_PRESCALE: prescale_work, **ATTENTION_WORK}
