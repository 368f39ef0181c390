"""FlashAttention-2 as vLLM runs it on Ampere/Ada (vllm_flash_attn, FA2): kernel names, the split-KV
heuristic, decode/prefill configs and the row builder (`attention_row(..., kernel="fa2")`);
mpsim/sim/gpu/library/fa2.py prices them.

Design facts, read from vllm-project/flash-attention @617264c1 (vLLM's fork of Dao-AILab's, the
same files as Dao-AILab/flash-attention @0251105a):
- vLLM calls `mha_varlen_fwd` with a paged KV cache (block_table) for decode and prefill alike.
  A paged call always runs the split-KV kernel (csrc/flash_attn/flash_api.cpp: `run_mha_fwd(params,
  stream, paged_KV)`, force_split_kernel).
- Decode with GQA (max_seqlen_q == 1, heads > kv_heads, no window: vLLM's window_size (W - 1, 0)
  keeps the right bound 0, which turns the swap off whatever W): `seqlenq_ngroups_swapped`, the
  query group of a KV head becomes the rows of one query tile (seqlen_q = group, heads = kv_heads),
  and the split count comes from `num_splits_heuristic(batch x kv_heads x m_blocks, 2 x SMs,
  n_blocks, 128)` (set_params_splitkv: "we're using 128 threads per block", so two CTAs an SM).
  Otherwise (MHA decode, prefill) the paged varlen call keeps vLLM's num_splits (0: one split).
- The split-KV kernel's tiles (csrc/flash_attn/src/flash_fwd_launch_template.h,
  run_mha_fwd_splitkv_dispatch): kBlockM 64, 4 warps; kBlockN 256 / 128 / 64 for head_dim <= 64 /
  <= 128 / larger when splits > 1; with one split `run_mha_fwd_splitkv_align`, kBlockN 128 for
  head_dim <= 64 else 64. Splits > 1 add the combine kernel (flash_fwd_splitkv_combine_kernel).
- The MMAs are mma.sync m16n8k16 (Ampere/Ada, csrc/flash_attn/src/kernel_traits.h: SM80_16x8x16
  MMA atoms, 4 warps along M, each warp's 16 rows against the whole K/V tile).
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_fp16_prefill,
    check_prefill_chunk,
    prefill_kv_block,
    window_entry,
)

FA2_DECODE = "fa2_decode"
FA2_PREFILL = "fa2_prefill"
KERNELS = (FA2_DECODE, FA2_PREFILL)
FA2_BLOCK_M = 64      # split-KV kernel: query rows per tile
FA2_WARPS = 4
FA2_MAX_SPLITS = 128


def fa2_num_splits(batch_nheads_mblocks: int, sms: int, num_n_blocks: int,
                   max_splits: int = FA2_MAX_SPLITS) -> int:
    """flash_api.cpp `num_splits_heuristic`: one split when the m-blocks fill 80% of the slots; else
    the fewest eligible splits whose wave efficiency is within 85% of the best (a split count is
    eligible when it changes the blocks per split). `sms`: the slots (vLLM's call passes 2 x SMs)."""
    if batch_nheads_mblocks >= 0.8 * sms:
        return 1
    cap = min(max_splits, sms, num_n_blocks)
    effs: list[float] = []
    for s in range(1, cap + 1):
        if s > 1 and cdiv(num_n_blocks, s) == cdiv(num_n_blocks, s - 1):
            effs.append(0.0)
            continue
        waves = batch_nheads_mblocks * s / sms
        effs.append(waves / -(-waves // 1))
    best = max(effs)
    return next((s for s in range(1, cap + 1) if effs[s - 1] > 0 and effs[s - 1] >= 0.85 * best), 1)


def split_block_n(head_dim: int) -> int:
    """kBlockN of the split-KV kernel with more than one split (run_mha_fwd_splitkv_dispatch)."""
    return 256 if head_dim <= 64 else (128 if head_dim <= 128 else 64)


def align_block_n(head_dim: int) -> int:
    """kBlockN of the one-split kernel (run_mha_fwd_splitkv_align)."""
    return 128 if head_dim <= 64 else 64


def fa2_decode_config(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, kv_len: int,
                      *, kv_append: bool = False, l2_warm: bool = False,
                      sms: int = GPU_SMS, window: int = 0) -> LaunchConfig:
    """vLLM's FA2 decode: with GQA one CTA per (sequence, KV head, split) holds the KV head's query
    group in a 64-row tile (seqlenq_ngroups_swapped); MHA: one CTA per (sequence, head), one live row.
    Under a sliding window (any `window` > 0, covering or not) the GQA swap is off: vLLM passes
    window_size (W - 1, 0), and flash_api.cpp swaps only when window_size_right < 0 too (its
    normalization drops a covering left bound, never the right 0), so every query head is a CTA of
    one live row, one split; a binding window is the config's `window` (its tile range)."""
    swapped = num_q_heads > num_kv_heads and not window
    heads = num_kv_heads if swapped else num_q_heads
    rows = num_q_heads // num_kv_heads if swapped else 1
    m_blocks = cdiv(rows, FA2_BLOCK_M)
    splits = 1
    if swapped:
        splits = fa2_num_splits(batch * heads * m_blocks, 2 * sms,
                                cdiv(max(kv_len, 1), split_block_n(head_dim)))
    bn = split_block_n(head_dim) if splits > 1 else align_block_n(head_dim)
    return LaunchConfig(FA2_DECODE, (m_blocks, splits, batch * heads), FA2_BLOCK_M, bn, head_dim,
                        FA2_WARPS, 2, splits, extra=(("kv_append", int(kv_append)),
                                                     ("l2_warm", int(l2_warm)), ("rows", rows),
                                                     *window_entry(kv_len, window)))


def fa2_prefill_config(batch: int, q_len: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                       *, kv_append: bool = False, l2_warm: bool = False, kv_len: int | None = None,
                       window: int = 0) -> LaunchConfig:
    """vLLM's FA2 causal prefill over the paged cache: the one-split split-KV kernel, 64-row query
    tiles per (sequence, query head) over kBlockN-key tiles up to the diagonal (a chunk after cached
    tokens: the diagonal shifted by them; the grid is the query tiles', the same); a binding sliding
    `window` over the kv_len keys (None: q_len) is the config's `window` (its tile range)."""
    m_blocks = cdiv(q_len, FA2_BLOCK_M)
    keys = q_len if kv_len is None else kv_len
    return LaunchConfig(FA2_PREFILL, (m_blocks, 1, batch * num_q_heads), FA2_BLOCK_M,
                        align_block_n(head_dim), head_dim, FA2_WARPS, 2, 1,
                        extra=(("kv_append", int(kv_append)), ("l2_warm", int(l2_warm)),
                               *window_entry(keys, window)))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """An `fa2_decode` (q_len 1) or `fa2_prefill` (q_len <= kv_len: the queries are the last q_len
    positions, flash_fwd_kernel.h compute_attn_1rowblock_splitkv's causal n_block_max) row; 16-bit
    K/V only (FA2 has no fp8 cache: vLLM runs FlashInfer for one, the `flashinfer_attention` room);
    `window`: a sliding window (its tile range: n_block_min as FA3's, the same formula)."""
    check_fp16_prefill(q_len, kv_bits)
    if fp8_attention or kv_bits != 16:
        raise MpsimInputError("attention: FlashAttention-2 runs a 16-bit KV cache and bf16/fp16 "
                              "compute only (vLLM runs FlashInfer for an fp8 cache)")
    if head_dim > 256 or head_dim % 8:
        raise MpsimInputError(f"attention: FlashAttention-2 takes head_dim <= 256, a multiple of 8; "
                              f"got {head_dim}")
    if q_len == 1:
        cfg = fa2_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_append=kv_append,
                                l2_warm=l2_warm, sms=sms, window=window)
    else:
        check_prefill_chunk("FA2", batch, q_len, kv_len, heads, kv_heads, head_dim)
        cfg = fa2_prefill_config(batch, q_len, heads, kv_heads, head_dim, kv_append=kv_append,
                                 l2_warm=l2_warm, kv_len=kv_len, window=window)
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits)
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return apply_config(row, cfg)
