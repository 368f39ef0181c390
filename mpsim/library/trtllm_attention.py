"""TensorRT-LLM's attention op (part of the trtllm room, mpsim/library/trtllm.py): kernel names, the
dispatch rule, launch configs and the row builder (`attention_row(..., kernel="trtllm")`);
mpsim/sim/gpu/library/trtllm_attention.py prices the rows.

TensorRT-LLM's generation (decode) attention on Hopper, PyTorch flow (`TrtllmAttention`), picks its
kernel per call; `trtllm_decode_kernel` is that rule, read from the source (NVIDIA/TensorRT-LLM,
cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/; docs/validation.md "Which kernel stands
for a row" cites each file):

- XQA is eligible (decoderXQAImplJIT/kernelUtils.cpp supportConfigCommon / QGMMA / HMMA) when the
  query heads are a multiple of the KV heads, the layout is not vanilla MHA (heads == kv_heads: "Do
  not use XQA kernel for vanilla MHA case for performance reasons"), head_dim % 16 == 0 and
  16 <= head_dim <= 256, heads / kv_heads <= 32, beam width 1 and paged blocks of 8..128 tokens.
- Among eligible calls, XQA runs when it "may have a perf gain" (decoderXQARunner.cpp
  mayHavePerfGain): kv_heads x batch x max(1, history // 128) x 4 >= SMs, history = kv_len
  (kMinHistoryTokensPerBlock 128, kEnableMinBlockFactor 4, decoderXQAConstants.h), or whatever
  the gain when the cache is fp8 e4m3 with a bf16/fp16 input ("MMHA does not support this
  combination", shouldUse); otherwise the masked multi-head attention kernel (MMHA) runs.
- XQA's kernel: on sm_90 with an e4m3 cache the Hopper warp-specialized GMMA kernel (RoPE and the
  KV append inside the kernel, appliesRoPEInXqaKernel), else the HMMA (mma.sync) kernel after the
  QKV-preprocessing kernel (RoPE + KV append, invokeQKVPreprocessing).
- XQA's split-KV ("multi-block") count (decoderXQAImplCommon.h computeMultiBlockCount): history //
  128, capped at round(sqrt(8 x that)), at least 1, divided by (kv_heads x batch x count / SMs) / 8
  when that wave count exceeds 8 (kTargetWaveFactor), at most 6000 // batch.
- MMHA (decoderMaskedMultiheadAttentionLaunch.h multi_block_grid_setup): one CTA per (sequence, query
  head, KV tile); tiles = clamp(ceil(SMs x blocks/SM / (batch x heads)), 1, ceil((kv_len + 1) /
  (threads / threads-per-value x 8))), thread groups sized by dh_max; the first loop runs only the
  warps of the tile's keys (decoderMaskedMultiheadAttentionTemplate.h k_loop_end). RoPE and the KV
  append happen inside the kernel.

The context (prefill) phase runs the fused context FMHA (fmha_v2 on sm_90: warp-specialized, 64- or
128-row query tiles over 128-key tiles, causal) after the same QKV preprocessing (RoPE + KV append;
the collector turns XQA JIT off for it).
"""

from __future__ import annotations

import math
from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_prefill_chunk,
    fp8_cache,
    prefill_kv_block,
    window_entry,
)

TRTLLM_XQA = "trtllm_xqa_decode"
TRTLLM_MMHA = "trtllm_mmha_decode"
TRTLLM_FMHA = "trtllm_context_fmha"
ATTENTION_KERNELS = (TRTLLM_XQA, TRTLLM_MMHA, TRTLLM_FMHA)
# decode kernels whose key tiles count the cached tokens and the new one (XQA's history and MMHA's
# tlength + 1, tlength = kv_len): they step when kv_len reaches a multiple of a tile, not one past it
KV_COUNTS_NEW_TOKEN = frozenset({TRTLLM_XQA, TRTLLM_MMHA})

XQA_MIN_HISTORY_PER_BLOCK = 128   # kMinHistoryTokensPerBlock (decoderXQAConstants.h)
XQA_ENABLE_MIN_BLOCK_FACTOR = 4   # kEnableMinBlockFactor
XQA_TARGET_WAVE_FACTOR = 8        # kTargetWaveFactor
XQA_MAX_SUB_SEQ = 6000            # getXqaMaxNumSubSeq (non-MLA)
XQA_MAX_GROUP = 32                # head_grp_size x beam_width <= 32 (kernelUtils.cpp)
XQA_GMMA_TILE = 64                # GMMA kernel: keys per CTA tile (mha_sm90.cu gemm0CtaTileNbTokens:
#                                   64-token warp-group tile x gemm0NbGmmaGrps 1)
XQA_HMMA_WARP_KEYS = 64          # HMMA kernel: keys of one warp's tile (warpTile.x)
XQA_HMMA_TILE = 256               # HMMA kernel: keys per CTA iteration (mha.cu ctaTile.x = warpTile.x 64
#                                   x ctaShapeInWarps.x 4; a split walks every nbSubSeq-th such tile)
XQA_GMMA_ROWS = 64                # GMMA: priced as 64 query rows whatever the group. The kernel swaps A/B
#                                   (mha_sm90.cu SWAP_AB: the tile's 64 keys are the MMA's M, the group
#                                   its N padded to 8), so a tile's work hardly depends on the group; the
#                                   group padded to 8 priced 16.2% MAPE on 140 H200 GMMA rows, 64 14.2%
MMHA_THREADS = 256                # THDS_PER_BLOCK, the base block size (assumption: not read per head_dim)
MMHA_BLOCKS_PER_SM = 4            # 256-thread blocks an SM ("the max number of warps we can launch per
#                                   SM is 32 limited by registers", mmha_launch_kernel_ex)
# blocks an SM by block size: 256 from the source (32 warps an SM "limited by registers"); 1024 by
# the same limit; 512: one, an observation of the H200 rows (the limit would allow two): priced with
# two, batch x heads in 133..264 gets two tiles once tlength + 1 passes 256 keys and two waves, and
# those rows came out +20..+70% (12.7-13.1 us measured at 256 keys against 11.3-11.4 at 128); with
# one, the 2000-row H200 draw's bf16-cache class goes 10.9 -> 9.9%, H100 11.4 -> 10.7%
MMHA_RESIDENT = {256: MMHA_BLOCKS_PER_SM, 512: 1, 1024: 1}
MMHA_UNROLL = 8                   # keys per thread group and loop ("unroll size is default at 8"):
#                                   V_LOOP_UNROLL, and multi_block_grid_setup's seq_len_per_kv_loop
MMHA_K_UNROLL = 4                 # K_LOOP_UNROLL ("default to 4 for higher occupancy (by reducing
#                                   registers usage)", decoderMaskedMultiheadAttentionTemplate.h)
FMHA_BLOCK_M = 128                # context FMHA query rows per CTA (fmha_v2 sm90 warp-specialized)
FMHA_BLOCK_N = 128                # keys per tile


# The QKV-preprocessing kernel (invokeQKVPreprocessing -> applyBiasRopeUpdateKVCacheV2; NVIDIA/
# TensorRT-LLM cpp/tensorrt_llm/kernels/unfusedAttentionKernels/unfusedAttentionKernels_2_template.h,
# the store's version, not pinned to 1.3.0rc20): BLOCK_SIZE threads by head size
# (kernelV2DispatchHeadSize's cases; any other head size falls back to the V1 kernel), each thread
# one 16-byte vector of a head, so a block holds BLOCK_SIZE / (head_dim x 2 / 16) tokens of ONE
# query head (grid.y = head_num: every query head has its blocks; those below kv_head_num also
# append K and V); grid.x from calGridSizeWithBestEfficiency with 1024 threads an SM, each block
# striding over the token blocks.
PREP_BLOCK_THREADS = {32: 256, 48: 192, 64: 256, 72: 288, 80: 160, 96: 192, 104: 416, 112: 224,
                      128: 256, 144: 288, 160: 160, 192: 192, 224: 224, 256: 256, 576: 576}
PREP_THREADS_PER_SM = 1024        # calGridSizeWithBestEfficiency(..., availableThreadsPerSm 1024)
PREP_V1_WARPS_PER_SM = 32         # the V1 kernel: one warp a (token, query head), WARPS_PER_SM 32
PREP_V1_MIN_SEQ_PER_WARP = 4      # MIN_SEQUENCES_PER_WARP: grid.z <= ceil(batch / 4)


def prep_grid_x(needed: int, batch_blocks: int, per_wave: int) -> int:
    """calGridSizeWithBestEfficiency: the first grid.x in 1..needed whose waves are fullest
    (efficiency = waves / ceil(waves), strictly better only; compared exactly as integers)."""
    best_num, best_den, pick = 0, 1, 1
    for x in range(1, needed + 1):
        blocks = x * batch_blocks
        den = per_wave * cdiv(blocks, per_wave)    # efficiency = blocks / den
        if blocks * best_den > best_num * den:
            best_num, best_den, pick = blocks, den, x
        if blocks == den:
            break
    return pick


def prep_rounds(batch: int, q_len: int, heads: int, head_dim: int, sms: int) -> tuple[int, int]:
    """(threads a block, rounds) of the QKV preprocessing over batch x q_len tokens: a round is one
    strided step of every resident block (V2), or one sequence of every resident warp (V1)."""
    if head_dim in PREP_BLOCK_THREADS:
        threads = PREP_BLOCK_THREADS[head_dim]
        per_wave = PREP_THREADS_PER_SM // threads * sms
        needed = cdiv(batch * q_len, threads // (head_dim * 2 // 16))
        gx = prep_grid_x(needed, heads, per_wave)
        return threads, cdiv(gx * heads, per_wave) * cdiv(needed, gx)
    z = min(cdiv(sms * PREP_V1_WARPS_PER_SM, q_len * heads), cdiv(batch, PREP_V1_MIN_SEQ_PER_WARP))
    return 32, cdiv(q_len * heads * z, sms * PREP_V1_WARPS_PER_SM) * cdiv(batch, z)


def xqa_eligible(heads: int, kv_heads: int, head_dim: int, beam: int = 1) -> bool:
    """kernelUtils.cpp supportConfigCommon + supportConfigHMMA's shape limits (beam 1, paged 64)."""
    if kv_heads < 1 or heads % kv_heads or heads == kv_heads or beam != 1:
        return False
    return head_dim % 16 == 0 and 16 <= head_dim <= 256 and heads // kv_heads <= XQA_MAX_GROUP


def trtllm_decode_kernel(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int,
                         kv_fp8: bool, sms: int = GPU_SMS) -> str:
    """TRTLLM_XQA or TRTLLM_MMHA: the kernel TensorRT-LLM's generation attention runs (sm_90)."""
    if not xqa_eligible(heads, kv_heads, head_dim):
        return TRTLLM_MMHA
    if kv_fp8:   # MMHA has no bf16-input / e4m3-cache path: XQA whatever the gain
        return TRTLLM_XQA
    blocks = max(1, kv_len // XQA_MIN_HISTORY_PER_BLOCK)   # history = kv_len (xqa_multi_block)
    gain = kv_heads * batch * blocks * XQA_ENABLE_MIN_BLOCK_FACTOR >= sms
    return TRTLLM_XQA if gain else TRTLLM_MMHA


def xqa_multi_block(batch: int, kv_heads: int, kv_len: int, sms: int = GPU_SMS) -> int:
    """computeMultiBlockCount (decoderXQAImplCommon.h). Its history is `max_past_kv_length` (older
    versions: `timestep`), taken as kv_len, the cache with the new token: the published H200 rows
    (32 query / 8 KV heads, bf16, batch <= 64) double in time from 128 to 256 keys, the two splits
    this gives (each split CTA pays its prologue), where the keys before the new one (255 // 128 = 1)
    would give none."""
    count = kv_len // XQA_MIN_HISTORY_PER_BLOCK
    count = min(count, round(math.sqrt(count * 8.0)))
    count = max(count, 1)
    adj = batch * kv_heads * count / sms / XQA_TARGET_WAVE_FACTOR
    if adj > 1.0:
        count = math.floor(count / adj)
    return max(min(max(count, 1), XQA_MAX_SUB_SEQ // batch), 1)


def xqa_config(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int, kv_fp8: bool,
               sms: int = GPU_SMS, *, gmma: bool | None = None) -> LaunchConfig:
    """XQA: one CTA per (multi-block split, KV head, sequence) holding the KV head's query group:
    GMMA (the Hopper fp8-cache kernel, RoPE + KV append fused; 3 warp groups) over 64-key tiles,
    priced as 64 rows (XQA_GMMA_ROWS); HMMA (after the preprocessing kernel;
    256 threads, mha.cu) pads it to 16 or 32 rows (warpTile.y = roundUp(group, 16)) over 256-key
    CTA tiles. `gmma` 1 for GMMA, 0 for HMMA; `gmma` None: sm_90's rule (GMMA over an e4m3 cache),
    False: the HMMA kernel whatever the cache (sm_8x: supportConfigQGMMA needs sm_90)."""
    group = heads // kv_heads
    gmma = kv_fp8 if gmma is None else gmma and kv_fp8
    rows = XQA_GMMA_ROWS if gmma else (16 if group <= 16 else 32)
    splits = xqa_multi_block(batch, kv_heads, kv_len, sms)
    tile = XQA_GMMA_TILE if gmma else XQA_HMMA_TILE
    return LaunchConfig(TRTLLM_XQA, (splits, kv_heads, batch), rows, tile, head_dim,
                        12 if gmma else 8, 2, splits, extra=(("gmma", int(gmma)),))


def mmha_threads(batch: int, heads: int, sms: int = GPU_SMS) -> int:
    """The MMHA block size (decoderMaskedMultiheadAttentionLaunch.h `mmha_launch_kernel_ex`, multi-block
    mode on): 256 threads x min(ceil(SMs x blocks/SM / (batch x heads)), blocks/SM), at most 1024,
    then 256 below 512 threads, 512 below 1024 (the launch checks; resources assumed to allow it)."""
    factor = min(cdiv(sms * MMHA_BLOCKS_PER_SM, batch * heads), MMHA_BLOCKS_PER_SM)
    threads = min(MMHA_THREADS * factor, 1024)
    return MMHA_THREADS if threads < 512 else (512 if threads < 1024 else 1024)


def mmha_dh_max(head_dim: int) -> int:
    """The head size MMHA's kernel is instantiated for (decoderMaskedMultiheadAttentionUtils.h
    `dh_max`: the next power of two of max(head_dim, 32)); its thread groups are sized by it."""
    return 1 << (max(head_dim, 32) - 1).bit_length()


def mmha_threads_per_value(head_dim: int) -> int:
    """`threads_per_value<T>(dh_max)`: one 16-byte bf16 vector of a value row a thread."""
    return mmha_dh_max(head_dim) * 2 // 16


def mmha_threads_per_key(head_dim: int) -> int:
    """`threads_per_key<T, Dh_MAX>`: as threads_per_value, at most a warp."""
    return min(32, mmha_threads_per_value(head_dim))


def mmha_key_slots(threads: int, head_dim: int) -> int:
    """K_PER_ITER: the keys a block's thread groups take in one pass."""
    return threads // mmha_threads_per_key(head_dim)


def mmha_loop_keys(threads: int, head_dim: int) -> int:
    """Keys per loop of a block: threads / threads-per-value x the unroll of 8 (`seq_len_per_kv_loop`
    of multi_block_grid_setup, UNROLLED_K_PER_ITER of the kernel's key loop)."""
    return cdiv(threads, mmha_threads_per_value(head_dim)) * MMHA_UNROLL


def mmha_splits(batch: int, heads: int, head_dim: int, kv_len: int, sms: int = GPU_SMS) -> int:
    """`multi_block_grid_setup`: clamp(ceil(SMs x resident blocks / (batch x heads)), 1, ceil((tlength
    + 1) / keys per loop)), the resident blocks at the chosen block size (MMHA_BLOCKS_PER_SM of 256
    threads: the kernel's register limit of 32 warps an SM). tlength, the kernel's timestep, is the
    row's kv_len (the cached tokens; the new one is the + 1): the H200 rows step where it says, e.g.
    32 x 128 MHA at batch 1, 1024-thread blocks of 512 keys a loop: 11.3 us at 256 cached keys, 15.3 at
    512 (two tiles)."""
    threads = mmha_threads(batch, heads, sms)
    resident = MMHA_RESIDENT[threads]
    balanced = cdiv(sms * resident, batch * heads)
    return max(1, min(balanced, cdiv(kv_len + 1, mmha_loop_keys(threads, head_dim))))


def mmha_tile_keys(kv_len: int, splits: int) -> int:
    """Keys one CTA's loops cover: `timesteps_per_block` = ceil((tlength + 1) / tiles) in multi-block
    mode; one tile runs the single-block kernel, whose loop covers the cached tokens only (the new
    token's score is computed before it)."""
    return max(kv_len - 1, 1) if splits == 1 else cdiv(kv_len + 1, splits)


def mmha_active_keys(threads: int, head_dim: int, tile_keys: int) -> int:
    """Key slots of the first loop whose threads run it: the loop starts at the thread's key slot
    (tidx / threads_per_key, K_PER_ITER slots) and ends at the tile's keys rounded up to a warp's
    unrolled keys (k_loop_end), so a tile shorter than one pass leaves whole warps idle; the idle
    slots' clamped loads and dot products are not issued. The value loop's groups (tidx /
    threads_per_value < keys) idle alike."""
    per_warp = max(1, 32 // mmha_threads_per_key(head_dim)) * MMHA_K_UNROLL
    return min(mmha_key_slots(threads, head_dim), cdiv(max(tile_keys, 1), per_warp) * per_warp)


def mmha_config(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int, kv_fp8: bool,
                sms: int = GPU_SMS) -> LaunchConfig:
    """MMHA: one CTA of 256-1024 threads (mmha_threads) per (KV tile, query head, sequence), each
    loop over `block_n` keys; `active` of the first loop's key slots run (mmha_active_keys)."""
    threads = mmha_threads(batch, heads, sms)
    splits = mmha_splits(batch, heads, head_dim, kv_len, sms)
    active = mmha_active_keys(threads, head_dim, mmha_tile_keys(kv_len, splits))
    return LaunchConfig(TRTLLM_MMHA, (splits, heads, batch), 1, mmha_loop_keys(threads, head_dim),
                        head_dim, threads // 32, 1, splits,
                        extra=(("active", active), ("k_per_iter", mmha_key_slots(threads, head_dim))))


def fmha_config(batch: int, q_len: int, heads: int, kv_heads: int, head_dim: int, fp8: bool,
                kv_fp8: bool) -> LaunchConfig:
    """The context FMHA: one CTA per (128-row query tile, head, sequence), causal; `fp8` 1 for the
    FP8 FMHA (e4m3 Q/K/V, fp8 MMAs), `kv_fp8` 1 when the KV append writes an e4m3 cache. With an
    e4m3 cache the FP8 FMHA runs too: on sm_90 TrtllmAttention forces the paged context FMHA, which
    reads K/V from the e4m3 cache (the collector's note on trtllm.py:1434 and attentionOp.cpp
    `hasFp8KvCache() && use_paged_context_fmha` at 1.3.0rc20; the rows agree: priced as a bf16 FMHA,
    long fp8-cache prompts came out 24% slow)."""
    q_tiles = cdiv(q_len, FMHA_BLOCK_M)
    return LaunchConfig(TRTLLM_FMHA, (q_tiles, heads, batch), FMHA_BLOCK_M, FMHA_BLOCK_N, head_dim,
                        12, 2, 1, extra=(("fp8", int(fp8 or kv_fp8)), ("kv_fp8", int(kv_fp8))))


def op_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
           kv_bits: int, kv_block: int | None) -> Row:
    """The shape columns of a TensorRT-LLM attention op row (every architecture's room): a 16-bit or
    an e4m3 cache, else one error; its paged block (prefill after cached tokens)."""
    if kv_bits not in (16, 8):
        raise MpsimInputError(f"attention: TensorRT-LLM's attention has a 16-bit or fp8 KV cache, "
                              f"got {kv_bits} bits")
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, fp8_cache(kv_bits))
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return row


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """A TensorRT-LLM attention op row: the context FMHA for a prompt (q_len = kv_len; a one-token
    prompt included) or a chunk of one after kv_len - q_len cached tokens (1 < q_len < kv_len: the
    chunked context, the paged context FMHA reading the prefix from the cache), else XQA or MMHA by
    the dispatch rule; 8-bit KV is e4m3 (decode and the
    context's append), `fp8_attention` the FP8 context FMHA. RoPE and the KV append are inside the
    op (`kv_append` is implied); `l2_warm`: replayed back to back; `window`: a sliding window (the
    keys a query sees), in the config where it binds (the dispatch and the split counts keep the
    whole cache: `windowed_keys`)."""
    row = op_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, kv_block)
    if q_len > 1:
        check_prefill_chunk("TensorRT-LLM context", batch, q_len, kv_len, heads, kv_heads, head_dim)
    fp8_kv = kv_bits == 8
    if q_len > 1 or kv_len == 1:  # a context call (a one-token prompt has no cache before it)
        cfg = fmha_config(batch, q_len, heads, kv_heads, head_dim, fp8_attention, fp8_kv)
    elif fp8_attention:
        raise MpsimInputError("attention: fp8_attention describes TensorRT-LLM's context FMHA")
    else:
        pick = trtllm_decode_kernel(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
        build = xqa_config if pick == TRTLLM_XQA else mmha_config
        cfg = build(batch, heads, kv_heads, head_dim, kv_len, fp8_kv, sms)
        cfg = replace(cfg, extra=(*cfg.extra, ("l2_warm", int(l2_warm))))
    return apply_config(row, replace(cfg, extra=(*cfg.extra, *window_entry(kv_len, window))))
