"""The TRT-LLM-derived trtllm-gen attention kernels FlashInfer ships, as vLLM runs them on Blackwell
(vllm/v1/attention/backends/flashinfer.py @00a817ad: `use_trtllm_attention` on sm_100 sends decode
to `trtllm_batch_decode_with_kv_cache` and prefill to `trtllm_batch_context_with_kv_cache`; the
published B200 rows name them `vllm_flashinfer_trtllmdecode` / `_trtllmprefill`): kernel names,
configs and the row builder (`attention_row(..., kernel="flashinfer_trtllm")`);
mpsim/sim/gpu/library/flashinfer_trtllm.py prices them.

The kernels are cubins built by TensorRT-LLM's closed trtllm-gen generator; their host code picks
them. Decode, read from that host code (NVIDIA/TensorRT-LLM
cpp/tensorrt_llm/kernels/trtllmGenKernels/fmha/fmhaKernels.h `hashFromRunnerParams`, which
FlashInfer's trtllm_fmha launcher carries): up to 16 query heads per KV head (head_dim not 32) run
`SwapsMmaAbForGeneration`, the group on the MMA's N side padded to 8 (<= 8 heads) or 16 rows;
17-32 run `KeepsMmaAbForGeneration`, the group on the M side of a 128-row query tile (the
TileSizeQ128 cubins of its kernel list; every row of the tile pays the MMA and the softmax,
padding included); the runner refuses more than 32. Assumed (labelled): one CTA per (KV head,
sequence, split) over 128-key tiles, split by FA3's rule (mpsim/library/fa3.py fa3_num_splits);
groups past 32 (vLLM's B200 rows have 40-64, so the FlashInfer vLLM 0.24.0 ran takes them) in the
same 128-row tile (pricing them as CTAs of 32 heads each read the KV once per CTA: +21% bias on
vLLM's 16-bit-cache rows of 40-64 heads against +2% in one tile, 1200 sampled rows); prefill
128 x 128 tiles, causal, GQA packed as FA3's. Configs say `fp8` 1 for an fp8 cache: vLLM
quantizes Q to it (`q_data_type = kv_cache_dtype` where trtllm attention can run, and "TRTLLM
prefill attention does not support BF16 Q and fp8 kv cache"), so the MMAs are fp8.
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.fa3 import fa3_num_splits
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_prefill_chunk,
    prefill_kv_block,
    window_entry,
)

TG_DECODE = "flashinfer_trtllm_decode"
TG_PREFILL = "flashinfer_trtllm_prefill"
KERNELS = (TG_DECODE, TG_PREFILL)
TG_BLOCK_N = 128          # keys per tile (assumption)
TG_SWAP_SMALL_ROWS = 8    # decode: SwapsMmaAbForGeneration's tile for up to 8 query heads per KV head
TG_SWAP_MAX_GROUP = 16    # ... and up to 16 (a 16-row tile)
TG_KEEP_MAX_GROUP = 32    # ... KeepsMmaAbForGeneration up to 32 (the runner read refuses more)
TG_KEEP_ROWS = 128        # ... its query tile (TileSizeQ128 cubins)
TG_BLOCK_M = 128          # prefill: query rows per tile (assumption)


def tg_decode_rows(group: int) -> int:
    """Query rows a trtllm-gen decode tile computes for `group` query heads per KV head (module
    docstring): 8 or 16 with swapped operands, else the kept-operand 128-row tile."""
    if group > TG_KEEP_ROWS:
        raise MpsimInputError(f"attention: trtllm-gen decode with {group} query heads per KV head: "
                              f"at most {TG_KEEP_ROWS} fit its query tile")
    if group <= TG_SWAP_SMALL_ROWS:
        return TG_SWAP_SMALL_ROWS
    return TG_SWAP_MAX_GROUP if group <= TG_SWAP_MAX_GROUP else TG_KEEP_ROWS


def tg_config(batch: int, q_len: int, heads: int, kv_heads: int, head_dim: int, kv_len: int,
              kv_bits: int, *, kv_append: bool, l2_warm: bool, sms: int, context: bool = False,
              pack_gqa: bool = True) -> LaunchConfig:
    """The decode kernel for one query token (unless `context`: a one-token prompt's context call),
    else the prefill kernel. `pack_gqa` (prefill): a CTA's tile holds the query group of a KV head
    (FlashInfer's paged call, `mGroupsHeadsQ`), else one query head (numHeadsPerCta 1)."""
    group = heads // kv_heads
    if q_len == 1 and not context:
        splits = fa3_num_splits(batch * kv_heads, sms, cdiv(max(kv_len, 1), TG_BLOCK_N))
        return LaunchConfig(TG_DECODE, (splits, kv_heads, batch), tg_decode_rows(group),
                            TG_BLOCK_N, head_dim, 4, 2, splits,
                            extra=(("kv_append", int(kv_append)), ("l2_warm", int(l2_warm)),
                                   ("fp8", int(kv_bits == 8))))
    per_cta = group if pack_gqa else 1
    q_tiles = cdiv(q_len * per_cta, TG_BLOCK_M)
    return LaunchConfig(TG_PREFILL, (q_tiles, batch * heads // per_cta), TG_BLOCK_M, TG_BLOCK_N,
                        head_dim, 4, 2, 1, extra=(("kv_append", int(kv_append)),
                                                  ("pack_gqa", int(pack_gqa)),
                                                  ("fp8", int(kv_bits == 8)),
                                                  ("l2_warm", int(l2_warm))))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int = GPU_SMS, fp8_attention: bool = False,
                  window: int = 0) -> Row:
    """A `flashinfer_trtllm_decode` (q_len 1) or `flashinfer_trtllm_prefill` (q_len <= kv_len: the
    queries last, trtllm_batch_context_with_kv_cache over the paged cache) row over a 16-bit or fp8
    e4m3 KV cache; `window`: a sliding window (vLLM passes window_left = W - 1), in the config where
    it binds (the split count keeps the whole cache)."""
    if fp8_attention or kv_bits not in (16, 8):
        raise MpsimInputError("attention: trtllm-gen rows have a 16-bit or fp8 KV cache and bf16 "
                              "attention compute")
    if q_len > 1:
        check_prefill_chunk("trtllm-gen", batch, q_len, kv_len, heads, kv_heads, head_dim)
    cfg = tg_config(batch, q_len, heads, kv_heads, head_dim, kv_len, kv_bits, kv_append=kv_append,
                    l2_warm=l2_warm, sms=sms)
    cfg = replace(cfg, extra=(*cfg.extra, *window_entry(kv_len, window)))
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits)
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return apply_config(row, cfg)
