"""TensorRT-LLM's CUTLASS fpA_intB GEMM (`trtllm_fpaintb_gemm`, the trtllm room's second kernel):
its tactics on Hopper and before, as the plugin profiler times them (docs/kernels-weight-only.md).

Sources, NVIDIA/TensorRT-LLM cpp/tensorrt_llm/: plugins/weightOnlyQuantMatmulPlugin (runs the tactic
its profiler timed fastest: these CUTLASS tiles at any M, and below M = 16 also the batched GEMV,
trtllm.py `plugin_candidates`);
kernels/cutlass_kernels/cutlass_heuristic.cpp (get_candidate_tiles_sm90, get_candidate_tiles for
WeightOnly, get_candidate_configs: stages and split-K); fpA_intB_gemm/fpA_intB_gemm_template_sm90.h
and launchers/fpA_intB_launcher_sm90.inl (A and B swapped: CTA shape = weight rows 64|128 x tokens
16..256 x 128 bytes of K; 64-row tiles ping-pong on PersistentScheduler, 128-row tiles cooperative
on StreamKScheduler); fpA_intB_gemm.h (SPLIT_K_LIMIT 7).

AWQ's pre-quant scale (`trtllm_awq_prescale`): plugins/weightOnlyGroupwiseQuantMatmulPlugin
(enqueue: with PRE_QUANT_SCALE and the CUTLASS path, pre_quant_scale_for_act multiplies the
activations by the per-channel scale into the workspace before the GEMM; the batched GEMV fuses it)
and kernels/preQuantScaleKernel.cu (apply_per_channel_scale_kernel_launcher: blocks of 128 threads,
one float4 (8 halves) of a row per thread and kProcessRows rows: 1 below 2048 x 2048 values, 4
below 4096 x 4096, 8 below 8192 x 8192, else 16).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.wo_tiled import (
    SCHED_DP,
    SCHED_PERSISTENT,
    SCHED_SPLIT_K,
    SCHED_STREAM_K,
    SM90_SMEM_BYTES,
    tile_stages,
    wo_config,
)

TRTLLM_FPAINTB = "trtllm_fpaintb_gemm"
TRTLLM_AWQ_PRESCALE = "trtllm_awq_prescale"
PRESCALE_THREADS = 128            # preQuantScaleKernel.cu: dim3 block(128)
PRESCALE_VECTOR = 8               # float4 of fp16 per thread and row
# (values below which, kProcessRows): apply_per_channel_scale_kernel_launcher
PRESCALE_ROWS = ((2048 * 2048, 1), (4096 * 4096, 4), (8192 * 8192, 8))
FPAINTB_WEIGHT_TILES = (64, 128)
FPAINTB_TOKEN_TILES = (16, 32, 64, 128, 256)
FPAINTB_BLOCK_K = 64              # 128 bytes of fp16
# get_candidate_tiles, WeightOnly, sm >= 75: CtaShape (tokens x weights x 64) 16x128, 16x256,
# 32x128, 64x128, 128x128, four warps each; split-K serial 1..SPLIT_K_LIMIT where K and K / split
# are multiples of 64 (is_valid_split_k_factor)
FPAINTB_SM80_TILES = ((16, 128), (16, 256), (32, 128), (64, 128), (128, 128))
FPAINTB_SPLIT_K_LIMIT = 7


def fpaintb_config(m: int, n: int, k: int, bits: int, tt: int, wt: int,
                   sms: int = GPU_SMS) -> LaunchConfig:
    """One sm90 tactic: a 64-row weight tile runs ping-pong on the persistent scheduler, a 128-row
    tile cooperative on the stream-K scheduler; stages fill the shared memory the epilogue leaves."""
    stages = tile_stages(wt, tt, FPAINTB_BLOCK_K, bits, SM90_SMEM_BYTES, wt * min(tt, 32) * 2)
    sched = SCHED_PERSISTENT if wt == 64 else SCHED_STREAM_K
    return wo_config(TRTLLM_FPAINTB, m, n, k, bits, tt, wt, FPAINTB_BLOCK_K, stages, sched,
                     128 * (1 + wt // 64), sms=sms)


def fpaintb_candidates(m: int, n: int, k: int, bits: int, sms: int = GPU_SMS,
                       arch: str = "hopper") -> list[LaunchConfig]:
    """The tactics the plugin profiler times: on Hopper 64|128 weight rows x 16..256 tokens (the
    2x1 / 1x2 / 2x2 cluster variants only change the L2 multicast, which the model does not price:
    one candidate each); before Hopper the CUTLASS 2 tiles with serial split-K."""
    if arch != "hopper":
        return fpaintb_candidates_sm80(m, n, k, bits, sms)
    return [fpaintb_config(m, n, k, bits, tt, wt, sms)
            for wt in FPAINTB_WEIGHT_TILES for tt in FPAINTB_TOKEN_TILES]


def fpaintb_candidates_sm80(m: int, n: int, k: int, bits: int,
                            sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The Ampere/Ada tactics (mma.sync, multistage, serial split-K). Only the 4-stage variant of
    each tile is a candidate: the model prices a deeper pipeline no slower, so the 2- and 3-stage
    ones the profiler also times never win here."""
    out = []
    for tt, wt in FPAINTB_SM80_TILES:
        for s in range(1, FPAINTB_SPLIT_K_LIMIT + 1):
            if k % FPAINTB_BLOCK_K == 0 and k % s == 0 and (k // s) % FPAINTB_BLOCK_K == 0:
                out.append(wo_config(TRTLLM_FPAINTB, m, n, k, bits, tt, wt, FPAINTB_BLOCK_K, 4,
                                     SCHED_DP if s == 1 else SCHED_SPLIT_K, 128, s, sms,
                                     extra=(("sm80", 1),)))
    if not out:
        raise ValueError(f"{TRTLLM_FPAINTB}: K={k} is not a multiple of {FPAINTB_BLOCK_K}")
    return out


def prescale_rows_per_thread(tokens: int, width: int) -> int:
    """kProcessRows of TensorRT-LLM's apply_per_channel_scale_kernel_launcher."""
    return next((r for below, r in PRESCALE_ROWS if tokens * width < below), 16)


def prescale_config(tokens: int, width: int) -> LaunchConfig:
    """The pre-quant scale's launch: grid (rows / kProcessRows, K / 8 / 128) of 128 threads."""
    if width % PRESCALE_VECTOR:
        raise ValueError(f"{TRTLLM_AWQ_PRESCALE}: K = {width} is not a multiple of {PRESCALE_VECTOR}")
    rows = prescale_rows_per_thread(tokens, width)
    grid = (-(-tokens // rows), -(-width // (PRESCALE_VECTOR * PRESCALE_THREADS)))
    return LaunchConfig(TRTLLM_AWQ_PRESCALE, grid, rows, PRESCALE_THREADS, None,
                        PRESCALE_THREADS // 32, 1)
