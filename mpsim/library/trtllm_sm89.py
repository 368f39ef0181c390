"""TensorRT-LLM's attention op on Ada (sm_89), PyTorch flow (`TrtllmAttention`): the context FMHA's
kernel names and tiles, the dispatch, the row builder (`attention_row(..., kernel="trtllm_sm89")`);
mpsim/sim/gpu/library/trtllm_sm89.py prices the context kernel, the trtllm room the decode ones.
The same op on Hopper is the trtllm room's (mpsim/library/trtllm_attention.py), on Blackwell
trtllm_sm100's.

What runs on sm_89, read from NVIDIA/TensorRT-LLM:
- generation: supportConfigQGMMA needs sm_90 (cpp/tensorrt_llm/kernels/xqa/ kernelUtils.cpp), so
  XQA runs its HMMA kernel (cpp/kernels/xqa/mha.cu) over a bf16 or an e4m3 cache; MMHA where XQA
  is not eligible or has no gain: the Hopper dispatch rule (trtllm_attention.trtllm_decode_kernel)
  with the GMMA kernel taken out. Over an e4m3 cache mha.cu copies the fp8 K/V to shared memory as
  they are and converts them to the input type in registers before mma.sync m16n8k16 (utils.cuh
  convertKCacheWordToF16 / convertVCacheWordToF16; for bf16 input element by element). The QKV
  preprocessing kernel (RoPE, the KV append) runs first (RoPE is inside XQA on sm_90's GMMA only).
- context: the fmha_v2 flash-attention kernels built for sm_89 (cpp/kernels/fmha_v2/setup.py
  enumerate_hmma_flash_kernels, sm 89, Ampere HMMA traits, 4 x 1 warps = 128 threads, any sequence
  length, the no-loop form), chosen by FusedMHARunnerV2::setupLaunchParams (fmhaRunner.cpp): with
  an e4m3 FMHA non-tiled ("Ada QMMA only supports non-tiled kernels"); at most 64 keys, or sm_8x
  with head_dim < 256, non-tiled; else tiled. Non-tiled bf16 tiles: 64 query rows x 64 keys a step
  (head_dim <= 32), 32 (40-128), 16 (above 128); tiled: 128 x 128 (head_dim <= 64), 64 x 128
  (72-256). The FP8 FMHA (enumerate_qmma_flash_kernels, qmma e4m3 m16n8k32): 128 x 128 (head_dim
  32-64), 64 x 32 (72-256), non-tiled. Grid (query tiles, heads, batch), no persistent scheduler
  (fused_multihead_attention_v2.cpp, the non-sm_90 branch). The preprocessing runs before it
  (enqueueContext invokeQKVPreprocessing), writing Q (and QKV) in e4m3 for the FP8 FMHA.
  An e4m3 cache with a bf16 FMHA keeps the bf16 kernel: the paged context FMHA, which would read the
  e4m3 cache, is not used (the L40S rows: an fp8 cache costs what a bf16 one does, median ratio
  0.99 per head_dim, where the FP8 FMHA's is 0.58-1.8).
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import (
    Row,
    apply_config,
    binding_window,
    check_prefill_chunk,
    window_entry,
)
from mpsim.library.trtllm_attention import (
    TRTLLM_XQA,
    mmha_config,
    op_row,
    trtllm_decode_kernel,
    xqa_config,
)

TRTLLM_SM89_FMHA = "trtllm_sm89_context_fmha"
KERNELS = (TRTLLM_SM89_FMHA,)
FMHA_WARPS = 4               # warps_m 4 x warps_n 1 (setup.py)
NON_TILED_MAX_KV = 64        # fmhaRunner.cpp: kvSeqLen <= 64 runs the non-tiled kernel
SM8X_TILED_HEAD_DIM = 256    # sm_86 / sm_89: head_dim < 256 runs the non-tiled kernel
# setup.py: the non-tiled kernels from head_dim 256 limit their QK / V fragments and load K and V
# without ldgsts (cp.async): the loads do not overlap the MMAs
SYNC_LOADS_HEAD_DIM = 256
TILED_HEAD_CHUNK = 128       # a tiled kernel holds its head in chunks of this (smem: 80 KB at 64 x 128)
# XQA's HMMA kernel over an e4m3 cache on sm_89 splits no sequence: the L40S rows (TRT-LLM 1.3.0rc20)
# grow linearly with the cache from one CTA up (batch 1, 2 query / 1 KV head, head_dim 128: 16.1 ns a
# key from 8,192 to 131,072 keys, where the bf16 cache's multi-block call takes 0.2-0.4 ns), 6.1 us a
# 256-key tile at head_dim 128 whatever the group (2-32) until the cache's bytes bind at 64 and more
# CTAs. An observation of l40s rows (the source's multi-block rule, read for sm_90, would split)
XQA_FP8_ONE_BLOCK = True
# MMHA over an e4m3 cache on sm_89 pays a per-CTA cost the bf16 cache does not: the L40S rows (vanilla
# MHA, head_dim 128, 1-64 cached keys) take 13.3-15.7 us at one CTA against 7.3-9.6 with a bf16 cache,
# and about 1 ms more at 65,536 CTAs; priced per CTA (TrtllmParams.sm89_mmha_fp8_cta_ns), cause not
# found in the source (an observation of l40s rows, not of Hopper's, where the fp8 MMHA pays none)


def fmha_tile(head_dim: int, kv_len: int, fp8: bool) -> tuple[int, int, bool]:
    """(query rows, keys a step, tiled) of the fmha_v2 kernel sm_89 runs (module docstring)."""
    if fp8:
        return (128, 128, False) if head_dim <= 64 else (64, 32, False)
    if kv_len <= NON_TILED_MAX_KV or head_dim < SM8X_TILED_HEAD_DIM:
        return 64, 64 if head_dim <= 32 else 32 if head_dim <= 128 else 16, False
    return (128, 128, True) if head_dim <= 64 else (64, 128, True)


def fmha_config(batch: int, q_len: int, kv_len: int, heads: int, head_dim: int, fp8: bool,
                kv_fp8: bool) -> LaunchConfig:
    """The context FMHA: one 128-thread CTA per (query tile, head, sequence), causal; `fp8` the FP8
    FMHA (e4m3 Q/K/V, qmma), `kv_fp8` the preprocessing's append writes an e4m3 cache."""
    rows, keys, tiled = fmha_tile(head_dim, kv_len, fp8)
    return LaunchConfig(TRTLLM_SM89_FMHA, (cdiv(q_len, rows), heads, batch), rows, keys, head_dim,
                        FMHA_WARPS, 1, 1, extra=(("fp8", int(fp8)), ("kv_fp8", int(kv_fp8)),
                                                 ("tiled", int(tiled)), ("sync_loads", int(
                                                     not tiled and head_dim >= SYNC_LOADS_HEAD_DIM))))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int = GPU_SMS, fp8_attention: bool = False,
                  window: int = 0) -> Row:
    """A TensorRT-LLM attention op row on sm_89: the context FMHA for a prompt (or a one-token one),
    else XQA's HMMA kernel or MMHA by the dispatch rule; 8-bit KV is e4m3, `fp8_attention` the FP8
    context FMHA. RoPE and the KV append are inside the op (`kv_append` is implied); `l2_warm`:
    replayed back to back; `window`: a sliding window, in a decode config where it binds (the
    Hopper room's decode kernels walk it as they do there); under a binding window the context
    FMHA is one error (fmha_v2's sm_89 kernels' windowed tiles are not modelled)."""
    fp8_kv = kv_bits == 8
    row = op_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, kv_block)
    if q_len > 1 or kv_len == 1:  # a context call (a one-token prompt has no cache before it)
        if binding_window(kv_len, window):
            raise MpsimInputError(f"attention: TensorRT-LLM's sm_89 context FMHA under a sliding "
                                  f"window of {window} keys (kv_len {kv_len}) is not modelled")
        if q_len > 1:
            check_prefill_chunk("TensorRT-LLM context", batch, q_len, kv_len, heads, kv_heads, head_dim)
        return apply_config(row, fmha_config(batch, q_len, kv_len, heads, head_dim, fp8_attention,
                                             fp8_kv))
    if fp8_attention:
        raise MpsimInputError("attention: fp8_attention describes TensorRT-LLM's context FMHA")
    pick = trtllm_decode_kernel(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
    if pick != TRTLLM_XQA:
        cfg = mmha_config(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
        if fp8_kv:  # MMHA over an e4m3 cache on sm_89 (MMHA_FP8_CTA)
            cfg = replace(cfg, extra=(*cfg.extra, ("sm89_fp8", 1)))
    else:
        cfg = xqa_config(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms, gmma=False)
        if fp8_kv and XQA_FP8_ONE_BLOCK:  # one CTA per (KV head, sequence) through the whole cache
            cfg = replace(cfg, grid=(1, kv_heads, batch), split_k=1)
    extra = (*cfg.extra, ("l2_warm", int(l2_warm)), *window_entry(kv_len, window))
    if cfg.kernel == TRTLLM_XQA:  # mha.cu's sm_89 build: its own per-CTA and per-tile costs
        extra = (*extra, ("sm89", 1))
    return apply_config(row, replace(cfg, extra=extra))
