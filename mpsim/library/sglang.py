"""SGLang's FA3 attention backend: kernel names and the row builder (`attention_row(...,
kernel="sglang")`); mpsim/sim/gpu/library/sglang.py prices the rows.

SGLang 0.5.14 on sm_90 runs FlashAttention-3 (sgl-kernel's flash_attn_with_kvcache, page size 1)
inside its RadixAttention layer: the KV store, then the kernel, no RoPE (aiconfigurator
collector/sglang/collect_attn.py). The kernels are the ones vLLM runs, so the rows take FA3's configs
(mpsim/library/fa3.py: split heuristic, pack-GQA) under SGLang's names; what differs is the op around
them, priced in SGLang's room.
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.library.fa3 import check_fa3_kv, fa3_decode_config, fa3_prefill_config
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_prefill_chunk,
    fp8_cache,
    prefill_kv_block,
)

SGLANG_FA3_DECODE = "sglang_fa3_decode"
SGLANG_FA3_PREFILL = "sglang_fa3_prefill"
KERNELS = (SGLANG_FA3_DECODE, SGLANG_FA3_PREFILL)


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """A `sglang_fa3_decode` (q_len 1; 16-bit or fp8 KV) or `sglang_fa3_prefill` row (q_len <=
    kv_len: an extend over cached tokens runs FA3 with the cache, as vLLM's chunks do); the KV
    store is always part of SGLang's op (`kv_append` implied). `window`: a sliding window of that
    many keys (SGLang passes window_size (sliding_window_size, 0) with sliding_window_size the window
    less one, as vLLM does): FA3's tile range and split heuristic, as the fa3 room prices it; the
    work model adds none of vLLM's windowed-decode costs (mpsim/sim/gpu/library/sglang.py)."""
    check_fa3_kv(q_len, kv_bits, fp8_attention)
    if q_len == 1:
        cfg = replace(fa3_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_append=True,
                                        l2_warm=l2_warm, sms=sms, window=window), kernel=SGLANG_FA3_DECODE)
    else:
        check_prefill_chunk("SGLang FA3", batch, q_len, kv_len, heads, kv_heads, head_dim)
        cfg = replace(fa3_prefill_config(batch, q_len, heads, kv_heads, head_dim, kv_append=True,
                                         sms=sms, kv_len=kv_len, fp8=kv_bits == 8, window=window),
                      kernel=SGLANG_FA3_PREFILL)
    if kv_bits == 8:  # FA3's fp8 forward: its MMAs at the fp8 tensor rate (the roofline's too)
        cfg = replace(cfg, extra=(*cfg.extra, ("fp8", 1)))
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, fp8_cache(kv_bits))
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return apply_config(row, cfg)
