"""vLLM's Triton attention backend (TRITON_ATTN): kernel names, its 2D / 3D dispatch, tile sizes,
configs and the row builder (`attention_row(..., kernel="vllm_triton")`);
mpsim/sim/gpu/library/vllm_triton.py prices the rows.

vLLM runs it where no other backend serves a shape: the published vLLM 0.24.0 rows with
`kernel_source` vllm_triton_attn are head_dim 192 over an fp8 cache on L40S and B200 (the selector's
pick for that shape there; the collector notes that FA4 on sm_100 rejects head_dim 192). Design facts,
read from vllm-project/vllm
(vllm/v1/attention/backends/triton_attn.py, vllm/v1/attention/ops/triton_unified_attention.py and
its helpers in ops/triton_quant_kv/_helpers.py; store versions, not pinned to 0.24.0):
- One kernel, `kernel_unified_attention`, over a grid of (q blocks, KV heads): a CTA holds BLOCK_M
  = 16 query rows (next_pow2(group) above a group of 16), BLOCK_Q = BLOCK_M // group query tokens
  of one sequence times the group's query heads, and walks TILE_SIZE-key tiles up to its last
  token (causal), from its first token's window start under a sliding window. Each tile reads the
  keys' physical blocks from the block table, then K (head_dim x tile) and V (tile x head_dim), both
  padded to HEAD_SIZE_PADDED = next_pow2(head_dim) lanes (masked loads), QK^T and PV as tl.dot,
  the online softmax between. The grid launches T // BLOCK_Q + num_seqs q blocks (an upper bound);
  the ones past a sequence's queries return at once.
- Decode (max_seqlen_q 1, num_seqs <= seq_threshold_3D = 128 // KV heads, snapped to the nearest
  CUDA-graph capture size): the 3D form, a third grid axis of NUM_PAR_SOFTMAX_SEGMENTS = 16
  segments, each over cdiv(len, 16 x tile) tiles (segments past the keys return), then
  `reduce_segments` over (tokens, query heads) merges the partials. Otherwise the 2D form, one CTA
  walking all of a sequence's tiles.
- Tiles (_get_tile_size): 32 keys in the 2D form; the 3D form's 16 for a 2-byte query, 32 for an
  fp8 one (and for Gemma 3's 1024-key window at head_dim 128 / 256).
- An fp8 cache: vLLM hands the kernel an e4m3 query (`supports_quant_query_input` on CUDA; the
  aiconfigurator collector casts it before timing, collector/vllm/collect_attn.py), K and V stay
  e4m3 (`_cast_kv_tile`: no dequantization with an fp8 query), so both dots run at the fp8 rate and
  the 3D tile is 32 keys. In serving vLLM's attention layer quantizes the query in a kernel of its
  own, not in this op (not priced here).
- The op writes the new tokens' K and V first (triton_reshape_and_cache_flash: 16-warp programs
  over (token, up to 2,048 of its K/V elements, 512 below sm_90), the cache's dtype cast in the
  store), as the collector times it.
"""

from __future__ import annotations

from dataclasses import replace

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import LaunchConfig, cdiv, next_pow2
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_prefill_chunk,
    fp8_cache,
    window_entry,
    window_first_block,
)

VLLM_TRITON_DECODE = "vllm_triton_decode"
VLLM_TRITON_PREFILL = "vllm_triton_prefill"
KERNELS = (VLLM_TRITON_DECODE, VLLM_TRITON_PREFILL)
SEGMENTS = 16                # NUM_PAR_SOFTMAX_SEGMENTS: the 3D form's segments per sequence
MIN_LAUNCH_GRID_SIZE_2D = 128  # seq_threshold_3D = this // KV heads
WARPS = 4                    # Triton's default: the launch passes none
STAGES = 3
# vLLM's default CUDA-graph capture sizes (VllmConfig._set_cudagraph_sizes: 1, 2, 4, steps of 8 to
# 256, then of 16 up to min(2 x max_num_seqs, 512)): the threshold snaps to the nearest one when
# decode runs under full CUDA graphs (the full ladder; a shorter one, max_num_seqs below 256, may
# snap it to its top entry, which is at least max_num_seqs: a batch takes the same form)
CAPTURE_SIZES = (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))


def query_block(heads: int, kv_heads: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_Q): the CTA's query rows and the query tokens they hold."""
    group = heads // kv_heads
    bm = 16 if group <= 16 else next_pow2(group)
    return bm, bm // group


def threshold_3d(kv_heads: int) -> int:
    """seq_threshold_3D: MIN_LAUNCH_GRID_SIZE_2D // KV heads, snapped to the nearest capture size
    (the first of two equally near); a power-of-two KV head count is already one."""
    raw = MIN_LAUNCH_GRID_SIZE_2D // kv_heads
    return min(CAPTURE_SIZES, key=lambda size: abs(size - raw))


def tile_size(head_dim: int, window: int, query_bytes: int, *, three_d: bool) -> int:
    """TILE_SIZE of the launch (_get_tile_size): 32 in the 2D form; in the 3D form 16 for a 2-byte
    query, 32 for an fp8 one or Gemma 3's 1024-key window at head_dim 128 / 256."""
    if not three_d or (window == 1024 and head_dim in (128, 256)):
        return 32
    return 16 if query_bytes >= 2 else 32


def segment_trips(kv_len: int, tile: int, segments: int, window: int = 0) -> tuple[int, ...]:
    """Key tiles each launched segment of one (sequence, KV head) walks: segment j of the 3D form
    covers tiles [j x per, (j + 1) x per) of per = cdiv(len, segments x tile), clipped to the
    window's first tile; one segment (the 2D form) walks them all."""
    tiles = cdiv(kv_len, tile)
    lo = window_first_block(kv_len - 1, window, tile)   # the decode query: the last of kv_len
    per = cdiv(kv_len, segments * tile)
    return tuple(max(0, min((j + 1) * per, tiles) - max(j * per, lo)) for j in range(segments))


def live_segments(kv_len: int, tile: int, segments: int) -> int:
    """Segments that do not return at once (segm_idx x per x tile < len): reduce_segments' count."""
    return cdiv(kv_len, cdiv(kv_len, segments * tile) * tile)


def decode_config(batch: int, heads: int, kv_heads: int, head_dim: int, kv_len: int, *,
                  query_bytes: int, window: int = 0, l2_warm: bool = False,
                  kv_append: bool = False) -> LaunchConfig:
    """A one-query-per-sequence launch: the 3D form (grid (q blocks, KV heads, 16)) for batch <=
    seq_threshold_3D, else the 2D form; `segments` 16 or 1, `rows` the CTA's query rows in use."""
    bm, bq = query_block(heads, kv_heads)
    three_d = batch <= threshold_3d(kv_heads)
    segments = SEGMENTS if three_d else 1
    tile = tile_size(head_dim, window, query_bytes, three_d=three_d)
    grid = (batch // bq + batch, kv_heads, *((segments,) if three_d else ()))
    return LaunchConfig(VLLM_TRITON_DECODE, grid, bm, tile, next_pow2(head_dim), WARPS, STAGES,
                        live_segments(kv_len, tile, segments),
                        extra=(("segments", segments), ("rows", bq * (heads // kv_heads)),
                               ("kv_append", int(kv_append)), ("l2_warm", int(l2_warm)),
                               *window_entry(kv_len, window)))


def prefill_config(batch: int, q_len: int, heads: int, kv_heads: int, head_dim: int, *,
                   window: int = 0, kv_append: bool = False) -> LaunchConfig:
    """The 2D launch over a prompt within itself: grid (batch x q_len // BLOCK_Q + batch, KV heads),
    32-key tiles."""
    bm, bq = query_block(heads, kv_heads)
    return LaunchConfig(VLLM_TRITON_PREFILL, (batch * q_len // bq + batch, kv_heads), bm, 32,
                        next_pow2(head_dim), WARPS, STAGES,
                        extra=(("rows", bq * (heads // kv_heads)), ("kv_append", int(kv_append)),
                               *window_entry(q_len, window)))


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False, window: int = 0) -> Row:
    """A `vllm_triton_decode` (one query per sequence: q_len 1, kv_len >= 1; a one-token prompt runs
    this form too) or `vllm_triton_prefill` row (a prompt within itself, q_len = kv_len), over a
    16-bit or fp8 cache (fp8: an e4m3 query, both dots at the fp8 rate); `kv_append`: the op's KV
    write first (vLLM's op always runs it; the validation scope sets it)."""
    if kv_bits not in (16, 8):
        raise MpsimInputError(f"attention: vLLM's Triton backend prices a 16-bit or fp8 cache, got "
                              f"{kv_bits} bits")
    if head_dim < 32:
        raise MpsimInputError(f"attention: vLLM's Triton backend takes head_dim >= 32, got {head_dim}")
    if fp8_attention and kv_bits != 8:
        raise MpsimInputError("attention: vLLM's Triton backend takes an fp8 query over an fp8 cache only")
    if q_len == 1:
        cfg = decode_config(batch, heads, kv_heads, head_dim, kv_len, query_bytes=1 if kv_bits == 8 else 2,
                            window=window, l2_warm=l2_warm, kv_append=kv_append)
    else:
        check_prefill_chunk("vLLM Triton", batch, q_len, kv_len, heads, kv_heads, head_dim)
        if kv_len != q_len:
            raise MpsimInputError(f"attention: vLLM's Triton prefill after {kv_len - q_len} cached "
                                  "tokens is not modelled")
        cfg = prefill_config(batch, q_len, heads, kv_heads, head_dim, window=window, kv_append=kv_append)
    if kv_bits == 8:  # an e4m3 query: both dots at the fp8 rate
        cfg = replace(cfg, extra=(*cfg.extra, ("fp8", 1)))
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, fp8_cache(kv_bits))
    row["kv_block"] = None
    return apply_config(row, cfg)
