"""SGLang's Triton attention backend: kernel names, its split heuristic, decode/prefill configs and
the row builder (`attention_row(..., kernel="sglang_triton")`); mpsim/sim/gpu/library/sglang_triton.py
prices the rows.

SGLang runs it where FA3 does not serve a model: on H200 the published SGLang 0.5.14 rows with
`kernel_source` triton are Gemma 4's attention (head_dim 256 under a 1024-key sliding window, and
head_dim 512), the backend the aiconfigurator collector names per model (ai-dynamo/aiconfigurator
collector/cases/models/Gemma4ForConditionalGeneration_cases.yaml: `sglang_backends: {90: triton}`).
Design facts, read from sgl-project/sglang python/sglang/srt/layers/attention/ (triton_backend.py,
triton_ops/decode_attention.py, triton_ops/extend_attention.py, triton_ops/metadata.py):
- Decode: stage 1 over grid (batch, head blocks, MAX_KV_SPLITS = `triton_attention_num_kv_splits`,
  8 by default): with GQA (`_fwd_grouped_kernel_stage1`) a CTA holds min(16, group) query heads of
  one KV head padded to BLOCK_H 16 rows (tl.dot), 32-key tiles, 4 warps, 2 stages; MHA
  (`_fwd_kernel_stage1`) a CTA per query head, 64-key tiles, vector dots on CUDA cores. Each key's
  slot is read from kv_indices first (page size 1). A sequence uses num_kv_splits of the launched
  splits (`get_num_kv_splits_triton`), each kv_len_per_split = ceil(ceil(len / splits) / 32) x 32
  keys; the other CTAs exit. Stage 2 (`_fwd_kernel_stage2`, grid (batch, query heads)) merges the
  splits' partial outputs.
- A sliding window in decode: the kernels read the last min(kv_len, sliding_window_size) keys
  (update_sliding_window_buffer), SGLang's sliding_window_size being the window less one (the
  collector runs window_size 1024 as runtime window 1023).
- Prefill (`extend_attention_fwd`, no cached prefix here): grid (batch, query heads, query tiles);
  on sm_90 BLOCK_M x BLOCK_N 128 x 64 for head_dim <= 256, 32 x 64 above; 8 warps (4 at head_dim
  <= 64), one stage. Query tile j walks the key tiles up to its diagonal; under a sliding window a
  tile whose keys all fall outside every row's window is skipped after its mask is built
  (SKIP_TILE), the loop still visiting it.
- The op stores the new tokens' K and V first (set_kv_buffer: in prefill after cloning k and v; an
  fp8 cache casts them with `.to(fp8)` first).
"""

from __future__ import annotations

import math
from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv, next_pow2
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_prefill_chunk,
    fp8_cache,
    window_entry,
)

SGLANG_TRITON_DECODE = "sglang_triton_decode"
SGLANG_TRITON_PREFILL = "sglang_triton_prefill"
KERNELS = (SGLANG_TRITON_DECODE, SGLANG_TRITON_PREFILL)
MAX_KV_SPLITS = 8        # server_args triton_attention_num_kv_splits (the collector's too)
MIN_BLOCK_KV = 32        # decode_attention.py _MIN_BLOCK_KV: a split's keys round up to it
BLOCK_H = 16             # grouped stage 1: query-head rows of a CTA's tile
DECODE_WARPS = 4


def num_kv_splits(batch: int, kv_len: int, heads: int, kv_heads: int, sms: int = GPU_SMS,
                  max_splits: int = MAX_KV_SPLITS) -> int:
    """get_num_kv_splits_triton for a batch of equal lengths (min = max: its first bound is one
    split): the splits grow with log2(len / 64) x SMs over the stage-1 CTAs of one split, capped at
    `max_splits`; a sequence then runs ceil(len / ceil(len / that)) of them."""
    ext = sms * max(math.log2(kv_len / 64.0), 1.0) if kv_len > 0 else sms
    group = heads // kv_heads
    token_grid = batch * (heads if group == 1 else cdiv(heads, min(BLOCK_H, group)))
    bound = min(cdiv(int(ext), token_grid), max_splits)
    return max(1, cdiv(kv_len, cdiv(kv_len, bound)))


def decode_keys(kv_len: int, window: int) -> int:
    """Keys a decode reads: all kv_len, or the last min(kv_len, window - 1) under a sliding window of
    `window` keys (SGLang's sliding_window_size is the window less one)."""
    return min(kv_len, window - 1) if window > 1 else kv_len


def decode_config(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int, *,
                  window: int = 0, l2_warm: bool = False, sms: int = GPU_SMS) -> LaunchConfig:
    """Stage 1's launch (stage 2 and the KV store ride in its row): grid (batch, head blocks,
    MAX_KV_SPLITS); block_m the query rows a CTA's tile holds (BLOCK_H with GQA, 1 for MHA), block_n
    its key tile, block_k head_dim padded to a power of two, split_k the splits a sequence uses,
    `keys` those the kernel reads (a window's), `split_keys` a split's."""
    group = heads // kv_heads
    keys = decode_keys(kv_len, window)
    splits = num_kv_splits(batch, keys, heads, kv_heads, sms)
    per = cdiv(cdiv(keys, splits), MIN_BLOCK_KV) * MIN_BLOCK_KV
    grouped = group > 1
    blocks = cdiv(heads, min(BLOCK_H, group)) if grouped else heads
    return LaunchConfig(SGLANG_TRITON_DECODE, (batch, blocks, MAX_KV_SPLITS),
                        BLOCK_H if grouped else 1, 32 if grouped else 64, next_pow2(head_dim),
                        DECODE_WARPS, 2, cdiv(keys, per),
                        extra=(("keys", keys), ("split_keys", per), ("rows", min(BLOCK_H, group)),
                               ("l2_warm", int(l2_warm)), *window_entry(kv_len, window)))


def prefill_tiles(head_dim: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of extend_attention on sm_90 (_get_block_sizes_for_extend_attention:
    Hopper's; sm_80/86/89/100 pick others, not modelled: the published rows are H200's)."""
    return (128, 64) if head_dim <= 256 else (32, 64)


def prefill_config(batch: int, q_len: int, heads: int, head_dim: int, *,
                   window: int = 0) -> LaunchConfig:
    """extend_attention_fwd's launch: grid (batch, query heads, query tiles), one stage; `window`
    the keys a query sees (0: all), the mask's SLIDING_WINDOW_SIZE plus one."""
    bm, bn = prefill_tiles(head_dim)
    return LaunchConfig(SGLANG_TRITON_PREFILL, (batch, heads, cdiv(q_len, bm)), bm, bn,
                        next_pow2(head_dim), 4 if head_dim <= 64 else 8, 1,
                        extra=window_entry(q_len, window))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """A `sglang_triton_decode` (q_len 1 over kv_len > 1 keys; 16-bit or fp8 KV) or
    `sglang_triton_prefill` row (a prompt within itself: q_len = kv_len, one token included: SGLang
    runs a one-token prompt through its extend kernel, and a decode always follows a prefill, so
    its cache holds at least two tokens; the KV store is part of SGLang's op, `kv_append` implied). With
    an fp8 cache the prefill still attends to the prompt's own bf16 K/V (the extend kernel reads the
    cache only for a cached prefix); `fp8_attention`: q, k, v handed over in e4m3 (the collector's
    fp8 rows), the dots at the fp8 rate."""
    if kv_bits not in (16, 8):
        raise MpsimInputError(f"attention: SGLang's Triton backend prices a 16-bit or fp8 cache, "
                              f"got {kv_bits} bits")
    if fp8_attention and kv_bits != 8:
        raise MpsimInputError("attention: SGLang's fp8 attention compute runs over an fp8 cache")
    if q_len == 1 and kv_len > 1:
        cfg = decode_config(batch, heads, kv_heads, head_dim, kv_len, window=window,
                            l2_warm=l2_warm, sms=sms)
    else:
        check_prefill_chunk("SGLang Triton", batch, q_len, kv_len, heads, kv_heads, head_dim)
        if kv_len != q_len:
            raise MpsimInputError(f"attention: SGLang's Triton prefill after {kv_len - q_len} cached "
                                  "tokens (its prefix stage) is not modelled")
        cfg = prefill_config(batch, q_len, heads, head_dim, window=window)
    if fp8_attention:   # q, k, v handed over in e4m3: the dots at the fp8 rate
        cfg = replace(cfg, extra=(*cfg.extra, ("fp8", 1)))
    elif kv_bits == 8:  # bf16 K and V cast into the fp8 cache before the store: two kernels
        cfg = replace(cfg, extra=(*cfg.extra, ("kv_cast", 1)))
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, fp8_cache(kv_bits))
    row["kv_block"] = None
    return apply_config(row, cfg)
