"""FlashAttention-3 as vLLM runs it: kernel names, the split-KV heuristic, decode/prefill configs
and the row builder (`attention_row(..., kernel="fa3")`); mpsim/sim/gpu/library/fa3.py prices them.
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    binding_window,
    check_prefill_chunk,
    fp8_cache,
    prefill_kv_block,
    window_entry,
)

FA3_DECODE = "fa3_decode"
FA3_PREFILL = "fa3_prefill"
KERNELS = (FA3_DECODE, FA3_PREFILL)


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


def check_fa3_kv(q_len: int, kv_bits: int, fp8_attention: bool) -> None:
    """FA3 reads a 16-bit or an fp8 e4m3 cache; with fp8 its forward runs Q, K and V in e4m3 (the
    query cast first: FA3 has no mixed-dtype kernel; vLLM's flash_attn backend calls
    scaled_fp8_quant on the query whenever its cache is fp8), in decode and prefill alike, so FP8
    attention compute is an fp8 cache's and nothing else's."""
    if kv_bits not in (16, 8):
        raise MpsimInputError(f"attention: FA3 has a 16-bit or fp8 KV cache, got {kv_bits} bits")
    if fp8_attention and kv_bits != 8:
        raise MpsimInputError("attention: FA3's FP8 attention reads an fp8 KV cache (--kv-bits 8); "
                              "with a 16-bit cache it computes in 16 bits")


FA3_BLOCK_N = 128      # keys per tile (decode and prefill, head_dim 128)
FA3_BLOCK_M = 128      # query rows per prefill tile


def loaded_keys(kv_len: int, window: int, block_m: int = FA3_BLOCK_M) -> int:
    """The keys FA3's split heuristic counts (flash_api.cpp get_num_splits, `seqlen_k_loaded`): all
    of them, or with a window (left W - 1, right 0, as vLLM passes it) min(kv, W + kBlockM)."""
    return kv_len if not window else min(kv_len, window + block_m)


def fa3_decode_config(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, kv_len: int,
                      *, kv_append: bool = False, l2_warm: bool = False,
                      sms: int = GPU_SMS, window: int = 0) -> LaunchConfig:
    """vLLM's FA3 decode: one CTA per (sequence, KV head, split) holding the KV head's query group
    padded to 64 rows (pack-GQA); `kv_append`: the measured op also wrote the new token's K/V
    (reshape_and_cache_flash); `l2_warm`: the launch repeats back to back (a CUDA-graph benchmark),
    so a KV cache that fits the usable L2 is read from it; `window`: a sliding window of that many
    keys (`binding_window`; the split heuristic counts the keys it loads)."""
    group = num_q_heads // num_kv_heads
    rows = 64 * cdiv(group, 64)
    window = binding_window(kv_len, window)
    blocks = cdiv(max(loaded_keys(kv_len, window), 1), FA3_BLOCK_N)
    splits = fa3_num_splits(batch * num_kv_heads, sms, blocks)
    return LaunchConfig(FA3_DECODE, (batch, num_kv_heads, splits), rows, FA3_BLOCK_N, head_dim, 4,
                        2, splits, extra=(("kv_append", int(kv_append)), ("l2_warm", int(l2_warm)),
                                          *window_entry(kv_len, window)))



def fa3_prefill_tile(head_dim: int, fp8: bool, local: bool = False) -> tuple[int, int]:
    """(kBlockM, kBlockN) of FA3's causal forward on Hopper over a paged cache of pages shorter than
    a key tile (vLLM's 16 tokens, SGLang's 1: paged_kv_non_TMA), by head_dim and operand width, and
    `local` for a binding sliding window: Dao-AILab/flash-attention hopper/tile_size.h
    `tile_size_fwd_sm90` at 07602adc (16-bit: 192 x 128 to head_dim 96 (x 160 local to 64), 128 x
    128 to 128, 128 x 96 to 192, 128 x 80 above (x 64 local); e4m3: 192 x 160 to 64, 192 x 128 to
    96, 128 x 160 to 192 (x 128 local above 128), 128 x 128 above (x 64 local))."""
    if head_dim <= 96:
        return 192, 160 if head_dim <= 64 and (fp8 or local) else 128
    if head_dim <= 128:
        return 128, 160 if fp8 else 128
    if head_dim <= 192:
        return 128, (128 if local else 160) if fp8 else 96
    return 128, 64 if local else (128 if fp8 else 80)


def fa3_prefill_config(batch: int, q_len: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
                       *, kv_append: bool = False, sms: int = GPU_SMS,
                       kv_len: int | None = None, window: int = 0, fp8: bool = False) -> LaunchConfig:
    """vLLM's FA3 causal prefill: query x key tiles by head_dim, operand width and a binding window
    (`fa3_prefill_tile`; 128 x 128 at head_dim 128 over a 16-bit cache), KV split by the same
    heuristic when the query tiles cannot fill the SMs. Pack-GQA (hopper/flash_api.cpp get_pack_gqa:
    a paged or varlen call with heads != kv_heads packs the KV head's query group into the rows of
    one tile): the tiles then run over q_len x group rows per (sequence, KV head). `kv_len` (None:
    q_len): the keys, a chunk's cached prefix included (vLLM's varlen call with seqused_k and the
    block table); the split heuristic counts their tiles (flash_api.cpp: num_n_blocks over
    max_seqlen_k, the loaded keys with a `window`)."""
    pack = num_q_heads != num_kv_heads
    heads = num_kv_heads if pack else num_q_heads
    keys = q_len if kv_len is None else kv_len
    window = binding_window(keys, window)
    bm, bn = fa3_prefill_tile(head_dim, fp8, bool(window))
    q_tiles = cdiv(q_len * (num_q_heads // heads), bm)
    splits = fa3_num_splits(batch * heads * q_tiles, sms, cdiv(loaded_keys(keys, window, bm), bn))
    return LaunchConfig(FA3_PREFILL, (q_tiles * splits, batch * heads), bm, bn,
                        head_dim, 12, 2, splits,
                        extra=(("kv_append", int(kv_append)), ("pack_gqa", int(pack)),
                               *window_entry(keys, window)))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """An `fa3_decode` (q_len 1; 16-bit or fp8 e4m3 KV) or `fa3_prefill` row: q_len queries, the last
    of kv_len keys (kv_len > q_len: a chunk after cached tokens, causal over the last q_len
    positions, hopper/block.h get_n_block_min_max); `window`: each query sees its last `window`
    keys (a sliding window, 0: all)."""
    check_fa3_kv(q_len, kv_bits, fp8_attention)
    if q_len == 1:
        cfg = fa3_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_append=kv_append,
                                l2_warm=l2_warm, sms=sms, window=window)
    else:
        check_prefill_chunk("FA3", batch, q_len, kv_len, heads, kv_heads, head_dim)
        cfg = fa3_prefill_config(batch, q_len, heads, kv_heads, head_dim, kv_append=kv_append,
                                 sms=sms, kv_len=kv_len, window=window, fp8=kv_bits == 8)
    if kv_bits == 8:  # FA3's fp8 forward: its MMAs at the fp8 tensor rate (the roofline's too)
        cfg = replace(cfg, extra=(*cfg.extra, ("fp8", 1)))
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, fp8_cache(kv_bits))
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return apply_config(row, cfg)
