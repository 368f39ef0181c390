"""Launch configs of the kernels that are not mpsim's: the ones the published measurements ran.

Rows measured on other software (cuBLAS, FlashAttention-3 in vLLM, TensorRT-LLM, vLLM's row-wise
kernels) name their kernel with one of these; mpsim/sim/gpu/kernels_known.py prices them and
documents each row's meaning. Their configs carry the settings the measured library would pick (or
the candidates an autotuner of that library would try). mpsim.kernels.launch_config re-exports
every name (`lc.CUBLAS_GEMM`, `lc.cublas_candidates`).
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.kernels.engine_attention import (
    ENGINE_ATTENTION_KERNELS,
    SGLANG_FA3_DECODE,
    SGLANG_FA3_PREFILL,
    TRTLLM_FMHA,
    TRTLLM_MMHA,
    TRTLLM_XQA,
    fmha_config,
    mmha_config,
    trtllm_decode_kernel,
    xqa_config,
)
from mpsim.kernels.launch_base import GPU_SMS, LaunchConfig, cdiv, next_pow2

__all__ = [
    "CUBLAS_BLOCK_K", "CUBLAS_GEMM", "CUBLAS_MAX_ACC", "CUBLAS_SMEM_BYTES", "CUBLAS_TOKEN_TILES",
    "CUBLAS_WEIGHT_TILES", "EXTERNAL_KERNELS", "FA3_BLOCK_M", "FA3_BLOCK_N", "FA3_DECODE",
    "FA3_PREFILL", "SGLANG_FA3_DECODE", "SGLANG_FA3_PREFILL", "TORCH_ADD", "TRTLLM_FMHA",
    "TRTLLM_MMHA", "TRTLLM_WO_GEMV", "TRTLLM_WO_MAX_ROWS", "TRTLLM_XQA", "VLLM_RMS_NORM",
    "VLLM_ROPE", "VLLM_SILU_MUL", "cublas_candidates", "cublas_config", "cublas_heuristic",
    "engine_attention_config", "fa3_decode_config", "fa3_num_splits", "fa3_prefill_config",
    "fmha_config", "framework_rowwise_config", "mmha_config", "trtllm_decode_kernel",
    "trtllm_wo_config", "xqa_config",
]

CUBLAS_GEMM = "cublas_gemm"
TRTLLM_WO_GEMV = "trtllm_wo_gemv"
FA3_DECODE = "fa3_decode"
FA3_PREFILL = "fa3_prefill"
VLLM_RMS_NORM = "vllm_rms_norm"
VLLM_ROPE = "vllm_rotary_embedding"
VLLM_SILU_MUL = "vllm_silu_and_mul"
TORCH_ADD = "torch_add"
EXTERNAL_KERNELS = (CUBLAS_GEMM, TRTLLM_WO_GEMV, FA3_DECODE, FA3_PREFILL, VLLM_RMS_NORM, VLLM_ROPE,
                    VLLM_SILU_MUL, TORCH_ADD, *ENGINE_ATTENTION_KERNELS)

# cuBLAS on Hopper: warp-specialized wgmma kernels, one CTA per SM, the weights on the wgmma M side
# (64-row warpgroups), the tokens on its N side (any multiple of 8 up to 256).
CUBLAS_TOKEN_TILES = (16, 32, 64, 128, 256)
CUBLAS_WEIGHT_TILES = (64, 128, 256)
CUBLAS_MAX_ACC = 128 * 256   # accumulator elements of two consumer warpgroups
CUBLAS_BLOCK_K = 64
CUBLAS_SMEM_BYTES = 220 * 1024


def cublas_config(m: int, n: int, k: int, token_tile: int, weight_tile: int, stream_k: bool,
                  sms: int = GPU_SMS) -> LaunchConfig:
    """One cuBLAS-like config: data-parallel tiles (grid = tiles) or persistent stream-K (grid =
    min(tile K-trips, SMs), every (tile, K trip) unit dealt evenly over the CTAs)."""
    tiles = cdiv(m, token_tile) * cdiv(n, weight_tile)
    units = tiles * cdiv(k, CUBLAS_BLOCK_K)
    stage = (token_tile + weight_tile) * CUBLAS_BLOCK_K * 2
    stages = max(2, min(8, CUBLAS_SMEM_BYTES // stage))
    grid = min(units, sms) if stream_k else tiles
    return LaunchConfig(CUBLAS_GEMM, (grid,), token_tile, weight_tile, CUBLAS_BLOCK_K, 12, stages,
                        extra=(("stream_k", int(stream_k)),))


def cublas_candidates(m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The tile x schedule candidates a cuBLAS heuristic picks among (data-parallel and stream-K)."""
    out = []
    for tt in CUBLAS_TOKEN_TILES:
        for wt in CUBLAS_WEIGHT_TILES:
            if tt * wt <= CUBLAS_MAX_ACC:
                out.append(cublas_config(m, n, k, tt, wt, False, sms))
                out.append(cublas_config(m, n, k, tt, wt, True, sms))
    return out


def cublas_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """A fixed choice when no autotune is wanted: stream-K, tokens tile the next power of two."""
    tt = min(128, max(16, next_pow2(m)))
    return cublas_config(m, n, k, tt, 256, True, sms)


def fa3_num_splits(total_mblocks: int, sms: int, num_n_blocks: int, max_splits: int = 128) -> int:
    """FlashAttention-3's split-KV heuristic (hopper/heuristics.h, num_splits_heuristic): no split
    when the m-blocks fill 80% of the SMs or the keys are <= 4 blocks, else the fewest splits whose
    wave efficiency is within 85% of the best."""
    if total_mblocks >= 0.8 * sms or num_n_blocks <= 4:
        return 1
    cap = min(max_splits, sms, num_n_blocks)
    effs = []
    for s in range(1, cap + 1):
        waves = total_mblocks * s / sms
        effs.append(waves / -(-waves // 1))
    best = max(effs)
    return next(s for s in range(1, cap + 1) if effs[s - 1] >= 0.85 * best)


FA3_BLOCK_N = 128      # keys per tile (decode and prefill, head_dim 128)
FA3_BLOCK_M = 128      # query rows per prefill tile


def fa3_decode_config(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, kv_len: int,
                      *, kv_append: bool = False, l2_warm: bool = False,
                      sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's FA3 decode: one CTA per (sequence, KV head, split) holding the KV head's query group
    padded to 64 rows (pack-GQA); `kv_append`: the measured op also wrote the new token's K/V
    (reshape_and_cache_flash); `l2_warm`: the launch repeats back to back (a CUDA-graph benchmark),
    so a KV cache that fits the usable L2 is read from it."""
    group = num_q_heads // num_kv_heads
    rows = 64 * cdiv(group, 64)
    blocks = cdiv(max(kv_len, 1), FA3_BLOCK_N)
    splits = fa3_num_splits(batch * num_kv_heads, sms, blocks)
    return LaunchConfig(FA3_DECODE, (batch, num_kv_heads, splits), rows, FA3_BLOCK_N, head_dim, 4,
                        2, splits, extra=(("kv_append", int(kv_append)), ("l2_warm", int(l2_warm))))


def fa3_prefill_config(batch: int, q_len: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                       *, kv_append: bool = False, sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's FA3 causal prefill: 128-row query tiles x 128-key tiles, KV split by the same
    heuristic when the query tiles cannot fill the SMs. Pack-GQA (hopper/flash_api.cpp get_pack_gqa:
    a paged or varlen call with heads != kv_heads packs the KV head's query group into the rows of
    one tile): the tiles then run over q_len x group rows per (sequence, KV head)."""
    pack = num_q_heads != num_kv_heads
    heads = num_kv_heads if pack else num_q_heads
    q_tiles = cdiv(q_len * (num_q_heads // heads), FA3_BLOCK_M)
    splits = fa3_num_splits(batch * heads * q_tiles, sms, cdiv(q_len, FA3_BLOCK_N))
    return LaunchConfig(FA3_PREFILL, (q_tiles * splits, batch * heads), FA3_BLOCK_M, FA3_BLOCK_N,
                        head_dim, 12, 2, splits,
                        extra=(("kv_append", int(kv_append)), ("pack_gqa", int(pack))))


TRTLLM_WO_MAX_ROWS = 4  # TensorRT-LLM's batched GEMV path takes M < 5 (larger M: its tiled GEMM)


def trtllm_wo_config(m: int, n: int, k: int, bits: int) -> LaunchConfig:
    """TensorRT-LLM's weight-only batched GEMV (M < 5, sm90 path, per-channel scales): CTAs of 128
    threads over 8 weight rows walking all of K in steps of 128 x (128 / bits) weights."""
    if bits not in (4, 8):
        raise ValueError(f"{TRTLLM_WO_GEMV}: bits must be 4 or 8, got {bits}")
    if not 1 <= m <= TRTLLM_WO_MAX_ROWS:
        raise ValueError(f"{TRTLLM_WO_GEMV}: the batched GEMV path takes 1..{TRTLLM_WO_MAX_ROWS} rows, "
                         f"got {m}")
    cta_k = 128 * (128 // bits)
    return LaunchConfig(TRTLLM_WO_GEMV, (1, max(1, n // 8)), m, 8, cta_k, 4, 1)


def framework_rowwise_config(kernel: str, tokens: int, width: int, *, heads: int = 0,
                             head_dim: int = 0) -> LaunchConfig:
    """vLLM's one-block-per-token row-wise kernels (threads = min(width, 1024); RoPE: min(query
    heads x head_dim / 2, 512)) and PyTorch's vectorized elementwise add (grid-stride)."""
    if kernel == VLLM_ROPE:
        threads = min(heads * head_dim // 2, 512)
    elif kernel in (VLLM_RMS_NORM, VLLM_SILU_MUL):
        threads = min(width, 1024)
    elif kernel == TORCH_ADD:
        threads = 128
    else:
        raise ValueError(f"not a framework row-wise kernel: {kernel!r}")
    threads = max(32, threads)
    return LaunchConfig(kernel, (tokens,), None, threads, None, cdiv(threads, 32), 1)


def engine_attention_config(kernel: str, batch: int, q_len: int, kv_len: int, heads: int,
                             kv_heads: int, head_dim: int, kv_bits: int, fp8_attention: bool,
                             l2_warm: bool, sms: int) -> LaunchConfig:
    """The config of a TensorRT-LLM ("trtllm") or SGLang ("sglang_fa3") attention row
    (kernels/engine_attention.py); ValueError for a row the kernel cannot run."""
    if kv_bits == 4:
        raise ValueError(f"{kernel} has no 4-bit KV cache (16 or fp8 only)")
    if q_len > 1 and kv_len != q_len:
        raise ValueError(f"{kernel} prefill rows attend within the prompt (kv_len == q_len)")
    warm = (("l2_warm", int(l2_warm)),)
    if kernel == "sglang_fa3":
        if q_len > 1:
            cfg = fa3_prefill_config(batch, q_len, heads, kv_heads, head_dim, kv_append=True, sms=sms)
            return replace(cfg, kernel=SGLANG_FA3_PREFILL)
        cfg = fa3_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_append=True,
                                l2_warm=l2_warm, sms=sms)
        return replace(cfg, kernel=SGLANG_FA3_DECODE)
    fp8_kv = kv_bits == 8
    if q_len > 1 or kv_len == 1:  # a context call (a one-token prompt has no cache before it)
        return fmha_config(batch, q_len, heads, kv_heads, head_dim, fp8_attention, fp8_kv)
    if fp8_attention:
        raise ValueError("fp8_attention describes the context FMHA (q_len > 1)")
    pick = trtllm_decode_kernel(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
    build = xqa_config if pick == TRTLLM_XQA else mmha_config
    cfg = build(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
    return replace(cfg, extra=cfg.extra + warm)
