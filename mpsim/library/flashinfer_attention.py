"""FlashInfer's attention as vLLM runs it (vLLM's FlashInfer backend): kernel names, FlashInfer's
tile and KV-split rules and the row builder (`attention_row(..., kernel="flashinfer_attention")`);
mpsim/sim/gpu/library/flashinfer_attention.py prices them.

Which kernels (vllm/v1/attention/backends/flashinfer.py, vllm-project/vllm @00a817ad): decode with
`use_tensor_cores=True` ("Tensor cores are enabled by default"), i.e. FlashInfer's batch prefill
kernel with q_len 1; prefill the same kernel, causal; on Blackwell `use_trtllm_attention` sends both
to the TRT-LLM-derived trtllm-gen kernels FlashInfer ships (trtllm_batch_decode_with_kv_cache,
trtllm_batch_context_with_kv_cache). The published rows say which ran (aiconfigurator's
`kernel_source`: vllm_flashinfer_fidecode / _fiprefill on L40S with an fp8 cache, _trtllmdecode /
_trtllmprefill on B200).

FlashInfer's own kernels (flashinfer-ai/flashinfer @fb28d724, the FA2 template on sm_80/sm_89):
- rows: the query heads of a KV head are packed into the rows (packed_qo_len = q_len x group,
  attention/scheduler.cuh PrefillSplitQOKVIndptr); the query tile `FA2DetermineCtaTileQ`
  (utils.cuh): 128 rows when packed_qo_len > 64 and head_dim < 256, 64 when > 16, else 16;
- KV split (PrefillBinarySearchKVChunkSize): the smallest chunk (in pages, at least 128 tokens)
  whose work items q_tiles x chunks fit max_batch_size_if_split = 2 x SMs / kv_heads (scheduler.cuh
  PrefillPlan: num_blocks_per_sm 2); chunks > 1 add the merge kernel. vLLM's page is 16 tokens.
- grid (work items, kv_heads); the KV tile follows from shared memory in the work model.
- a sliding window (vLLM passes window_left = W - 1): the plan counts each request's KV as at most
  ceil((window_left + cta_tile_q) / page) pages (PrefillSplitQOKVIndptr's effective_kv_len_arr),
  and the kernel starts a query tile at kv_start_idx = kv_len + first token - qo_len - window_left
  (prefill.cuh: "skip out-of-window kv tile"), so a tile walks its window, not the whole cache.

The trtllm-gen kernels FlashInfer ships (vLLM on Blackwell): mpsim/library/flashinfer_trtllm.py.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    binding_window,
    check_prefill_chunk,
    prefill_kv_block,
    window_entry,
)

FI_DECODE = "flashinfer_decode"
FI_PREFILL = "flashinfer_prefill"
KERNELS = (FI_DECODE, FI_PREFILL)
PAGE_TOKENS = 16          # vLLM's default KV block (page) size
MIN_CHUNK_TOKENS = 128    # scheduler.cuh: min_kv_chunk_size = max(128 / page_size, 1) pages


def cta_tile_q(packed_qo_len: int, head_dim: int) -> int:
    """FA2DetermineCtaTileQ for head_dim < 512 (utils.cuh)."""
    if packed_qo_len > 64 and head_dim < 256:
        return 128
    return 64 if packed_qo_len > 16 else 16


def window_pages(kv_len: int, window: int, tile_q: int) -> int:
    """A request's KV pages as the plan counts them: all of them, or under a window of `window`
    keys at most ceil((window - 1 + cta_tile_q) / page) (effective_kv_len_arr)."""
    pages = cdiv(max(kv_len, 1), PAGE_TOKENS)
    return min(cdiv(window - 1 + tile_q, PAGE_TOKENS), pages) if window else pages


def kv_chunks(batch: int, q_tiles: int, kv_len: int, kv_heads: int, sms: int, window: int = 0,
              tile_q: int = 16) -> int:
    """KV chunks per request: PrefillBinarySearchKVChunkSize over pages (a window's effective
    ones), uniform requests."""
    pages = window_pages(kv_len, window, tile_q)
    budget = (2 * sms) // kv_heads
    lo, hi = max(MIN_CHUNK_TOKENS // PAGE_TOKENS, 1), pages
    while lo < hi:
        mid = (lo + hi) // 2
        if batch * q_tiles * cdiv(pages, mid) > budget:
            lo = mid + 1
        else:
            hi = mid
    return cdiv(pages, max(lo, 1)) if lo < pages else 1


def fi_config(batch: int, q_len: int, heads: int, kv_heads: int, head_dim: int, kv_len: int,
              kv_bits: int, *, kv_append: bool, l2_warm: bool, sms: int, window: int = 0) -> LaunchConfig:
    group = heads // kv_heads
    tile = cta_tile_q(q_len * group, head_dim)
    q_tiles = cdiv(q_len * group, tile)
    chunks = kv_chunks(batch, q_tiles, kv_len, kv_heads, sms, binding_window(kv_len, window), tile)
    kernel = FI_DECODE if q_len == 1 else FI_PREFILL
    return LaunchConfig(kernel, (batch * q_tiles * chunks, kv_heads), tile, None, head_dim, 4, 1,
                        chunks, extra=(("kv_append", int(kv_append)), ("l2_warm", int(l2_warm)),
                                       ("kv_fp8", int(kv_bits == 8)), *window_entry(kv_len, window)))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int = GPU_SMS, fp8_attention: bool = False,
                  window: int = 0) -> Row:
    """A `flashinfer_decode` / `flashinfer_prefill` row (FlashInfer's FA2-template kernels) over a
    16-bit or fp8 e4m3 KV cache (prefill reads the prompt's K/V from the cache in its format; q_len
    <= kv_len: BatchPrefillWithPagedKVCache's causal mask puts the queries last, a chunk after
    kv_len - q_len cached tokens); `window`: a sliding window of that many keys a query sees."""
    if fp8_attention or kv_bits not in (16, 8):
        raise MpsimInputError("attention: FlashInfer rows have a 16-bit or fp8 KV cache and bf16 "
                              "attention compute")
    if head_dim not in (64, 128, 256):
        raise MpsimInputError(f"attention: FlashInfer (vLLM's backend) takes head_dim 64, 128 or "
                              f"256; got {head_dim}")
    if q_len > 1:
        check_prefill_chunk("FlashInfer", batch, q_len, kv_len, heads, kv_heads, head_dim)
    cfg = fi_config(batch, q_len, heads, kv_heads, head_dim, kv_len, kv_bits, kv_append=kv_append,
                    l2_warm=l2_warm, sms=sms, window=window)
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits)
    row["kv_block"] = prefill_kv_block(q_len, kv_len, kv_block)
    return apply_config(row, cfg)
