"""TensorRT-LLM's attention op (PyTorch flow, `TrtllmAttention`) as CTA work: XQA and MMHA decode,
the context FMHA (part of the trtllm room). Which kernel a call runs: mpsim/library/trtllm_attention.py
(the dispatch rule).

Every call is the whole op as aiconfigurator timed it: RoPE on Q and K and the new tokens' K/V
appended to the paged cache (64 tokens a block) are part of it, fused in the kernel (XQA's Hopper
GMMA kernel, MMHA) or a separate QKV-preprocessing kernel before it: XQA HMMA (`xqa_prep_us`, a
fixed cost: a batch of tokens' element-wise work) and the context FMHA (`prep_part`: the kernel's
blocks cover every query head, 16 tokens of one head a 256-thread block at head_dim 128, in rounds
of resident blocks as its launch strides them, `prep_round_ns` a round; mpsim/library/
trtllm_attention.py `prep_rounds` reads the launch from the source).

- XQA (`trtllm_xqa_decode`): one CTA per (split, KV head, sequence) holds the KV head's query group
  padded (GMMA: priced as 64 rows, XQA_GMMA_ROWS; HMMA: 16/32 rows) and walks its share of the
  cache in tiles (GMMA 64 keys; HMMA 256 keys, four warps of 64 each; config `block_n`):
  per tile it loads K and V (bf16, or one byte an element for e4m3), runs QK^T and PV on the tensor
  cores (fp8 rate for the GMMA kernel on an e4m3 cache) and the softmax on the fp32 lanes; a tile
  also pays a dependent round trip (`*_trip_ns`: paged-block lookup, then the load). Splits are
  merged inside the kernel by the last CTA of each (KV head, sequence) (`xqa_combine_us` GMMA,
  `hmma_combine_us` HMMA).
- MMHA (`trtllm_mmha_decode`): one CTA of 256-1024 threads (32 warps an SM) per (KV tile, query
  head, sequence), `block_n` keys a loop (the block size / threads per value x 8); each
  query head re-reads its KV head's keys (the other heads of the group hit in L2), and the dot
  products run on the fp32 lanes (`mmha_ops` lane-ops per K/V element), a dependent round trip per
  loop (`mmha_trip_ns`); the tiles' partial results are reduced in the kernel. A tile shorter than
  one pass of the block's key slots leaves whole warps idle (config `active` of `k_per_iter` slots,
  mmha_active_keys): a one-loop tile issues that share of the loop's lane-ops.
- Context FMHA (`trtllm_context_fmha`): 128-row query tiles over 128-key tiles up to the diagonal,
  qt(qt+1)/2 tile pairs per (sequence, head), at `fmha_eta` of the tensor rate (`fmha_fp8_eta` of
  the fp8 rate for the FP8 FMHA), a prologue/epilogue per CTA (`fmha_tile_ns`) and per query row
  it holds (`fmha_row_ns`: the Q load, the output's normalization and store, not hidden by the main
  loop; a short prompt's tile holds few rows). A chunk of a prompt
  after kv_len - q_len cached tokens (chunked context: the paged context FMHA reads them from the
  cache): the diagonal shifts by the cached tokens, query tile j visits ceil((min(q_len, 128 (j +
  1)) + kv_len - q_len) / 128) key tiles (assumed: FA3's rule, the causal mask putting the queries
  last), the cached K/V read once; the preprocessing appends the chunk's q_len tokens only.
  Under a binding sliding window a query tile walks its window's key tiles, its two masked edge
  tiles at `fmha_window_eta` (bf16), or for the FP8 FMHA at `fmha_fp8_eta` plus
  `fmha_fp8_mask_ops` fp32 lane-ops per score (`fp8_window_ops`).

A KV cache that fits the usable L2 stays there across the benchmark's back-to-back replays
(`l2_warm`, as FA3's). Constants: TrtllmParams (mpsim/sim/gpu/library/trtllm.py, SimParams.trtllm).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.trtllm_attention import (
    MMHA_RESIDENT,
    TRTLLM_FMHA,
    TRTLLM_MMHA,
    TRTLLM_XQA,
    XQA_HMMA_WARP_KEYS,
    mmha_tile_keys,
    prep_rounds,
)
from mpsim.sim.gpu.library.fa3 import decode_tiles, prefill_kv_bytes, tile_spans
from mpsim.sim.gpu.memory import replayed_kv_bytes
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

# The HMMA kernel is built for two CTAs an SM on sm_90 (mha.cu `__launch_bounds__(256, nbCtaPerSM)`,
# nbCtaPerSM 2 on sm_90, 1 elsewhere), but the published rows show a second CTA on an SM adds its
# whole cost (H200, 32 query / 8 KV heads, head_dim 128, 2 cached tokens: 9.8 us with 64 CTAs,
# 14.7 with 256, 24.5 with 512, 600 with 16384: about 4.9 us an SM per CTA, serial): priced as one
# CTA an SM at a time (an observation of h200_sxm's rows, not a source fact)
HMMA_RESIDENT = 1

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams




def _kv_dram(cfg: Mapping[str, int], kv_bytes: float, r: GpuRates, p: SimParams) -> float:
    """The KV bytes a launch reads from DRAM: those a replay does not find in L2."""
    return kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes, r, p)


def _shape(row: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    return tuple(int(row[c]) for c in ("batch", "kv_len", "num_q_heads", "num_kv_heads",  # type: ignore[return-value]
                                       "head_dim"))


def xqa_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
             p: SimParams, resident: float) -> LaunchWork:
    t = p.trtllm
    b, kv, hq, hk, d = _shape(row)
    elem = int(row["k_bits"]) / 8
    gmma = bool(int(cfg.get("gmma", 0)))
    sm89 = bool(int(cfg.get("sm89", 0)))   # mha.cu's sm_89 build (one CTA an SM by its bounds)
    hmma_cta, hmma_trip = ((t.sm89_hmma_cta_ns, t.sm89_hmma_trip_ns) if sm89
                           else (t.hmma_cta_ns, t.hmma_trip_ns))
    rows, bn = int(cfg["block_m"]), int(cfg["block_n"])
    # a split walks every splits-th tile; a split beyond the tiles still loads Q and joins the merge
    # (mha.cu), priced as one tile like the others
    splits = int(cfg.get("split_k", 1))
    window = int(cfg.get("window", 0))
    first, visited = decode_tiles(kv, cfg, bn)   # a sliding window's skipped and visited tiles
    tiles = cdiv(visited, splits)
    # a window's splits without a tile in it return early: GMMA's priced free, HMMA's as a share of
    # a working CTA (`hmma_idle_split`)
    idle = splits - min(splits, visited) if window else 0
    ctas = b * hk * (splits - idle + (0 if gmma else math.ceil(idle * t.hmma_idle_split)))
    d_mma = 1 << (d - 1).bit_length()   # the MMAs run on the head padded to a power of two
    # the port moves whole tiles (the per-tile cost the constants were fitted with); the chip's L2
    # serves GMMA's whole 64-token pages (TMA) but only HMMA's cached tokens (mha.cu: the last
    # tile's copyPartialHeadsAsync of nbHeadsAvail heads; warps past the sequence stop)
    keys = max(kv - first * bn, 1) / (splits * tiles)   # cached keys a trip of a split
    served = None if gmma else keys * d * 2 * elem
    # HMMA over an e4m3 cache (sm_8x): each K/V element converted to the input type in registers
    # (the warps holding cached keys: those past the sequence stop, SHORT_SEQ_OPT)
    live = min(bn, cdiv(math.ceil(keys), XQA_HMMA_WARP_KEYS) * XQA_HMMA_WARP_KEYS)
    cvt = {"cvt": live * d_mma * 2 * t.hmma_fp8_cvt} if elem < 2 and not gmma else {}
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * rows * bn * d_mma,
                pipes={"fp32": rows * bn * t.xqa_softmax_ops, **cvt}, serial=True,
                mma_dtype="fp8" if gmma else "fp16",
                latency_ns=t.gmma_trip_ns if gmma else hmma_trip, overlap_latency=True,
                l2_bytes=served)
    # GMMA's TMA moves whole 64-token pages from the window's first one; HMMA loads the cached
    # tokens in range only (mha.cu: warps past the window or the sequence issue no load)
    in_range = kv - first * bn if gmma or not window else min(kv, window)
    kv_bytes = b * hk * in_range * d * 2 * elem
    reads = b * hq * d * FP16 * 3 + _kv_dram(cfg, kv_bytes, r, p)
    combine = t.xqa_combine_us if gmma else t.hmma_combine_us
    fixed = t.xqa_scope_us + (combine if splits > 1 else 0.0) \
        + (0.0 if gmma else t.xqa_prep_us)
    out = b * hq * d * (1 if gmma else FP16)
    res = CtaResources(12 if gmma else 8, bn * d * 2 * elem, rows * d * FP16, 2, 128)
    setup = (t.gmma_cta_ns if gmma else hmma_cta) + t.xqa_head_ns * (hq // hk) * d / 128
    work = KernelWork(trip, Epilogue(out / ctas), (tiles,), "single", ctas, ctas, res, reads,
                      setup_ns=setup, fixed_ns=fixed * 1e3, name="trtllm xqa")
    return [KernelPart(work, Occupancy(1 if gmma else HMMA_RESIDENT, 2, False, "kernel"))]


def mmha_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> LaunchWork:
    t = p.trtllm
    b, kv, hq, hk, d = _shape(row)
    elem = int(row["k_bits"]) / 8
    bn, splits = int(cfg["block_n"]), int(cfg.get("split_k", 1))
    kv = windowed_keys(kv, int(cfg.get("window", 0)))
    loops = cdiv(max(mmha_tile_keys(kv, splits), 1), bn)
    # one loop: only the active key slots' warps issue it (mmha_active_keys); more: every warp
    busy = int(cfg.get("active", 1)) / int(cfg.get("k_per_iter", 1)) if loops == 1 else 1.0
    ctas = b * hq * splits
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=0.0,
                pipes={"fp32": busy * bn * d * 2
                       * (t.mmha_ops + (t.mmha_fp8_ops if elem < 2 else 0.0))},
                serial=True,
                latency_ns=t.mmha_trip_ns, overlap_latency=True,
                # the port moves whole loops as fitted; the chip's L2 serves the tile's keys only
                # (the clamped loads past them are not issued)
                l2_bytes=max(mmha_tile_keys(kv, splits), 1) / loops * d * 2 * elem)
    kv_bytes = b * hk * kv * d * 2 * elem
    reads = b * hq * d * FP16 * 3 + _kv_dram(cfg, kv_bytes, r, p)
    fixed = t.mmha_scope_us + (t.mmha_combine_us if splits > 1 else 0.0)
    warps = int(cfg["num_warps"])
    res = CtaResources(warps, 0.0, d * 64, 1, 64)
    work = KernelWork(trip, Epilogue(b * hq * d * FP16 / ctas), (loops,), "single", ctas, ctas, res,
                      reads, setup_ns=t.mmha_cta_ns + t.sm89_mmha_fp8_cta_ns * int(cfg.get("sm89_fp8", 0)),
                      fixed_ns=fixed * 1e3, name="trtllm mmha")
    return [KernelPart(work, Occupancy(MMHA_RESIDENT[warps * 32], 1, False, "kernel"))]


def context_shape(row: Mapping[str, Any], cfg: Mapping[str, int]) -> tuple[int, ...]:
    """(batch, q_len, kv_len, query heads, KV heads, head_dim, fp8, query rows, keys a step) of a
    context FMHA row (fp8 1: e4m3 Q/K/V and MMAs)."""
    return (*(int(row[c]) for c in ("batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads",
                                   "head_dim")),
            int(cfg.get("fp8", 0)), int(cfg["block_m"]), int(cfg["block_n"]))


def diagonal_steps(batch: int, q_len: int, kv_len: int, heads: int, bm: int, bn: int,
                   window: int = 0) -> int:
    """Key steps of bn keys every (sequence, head) walks with bm-row query tiles up to the causal
    diagonal shifted by the kv_len - q_len cached tokens (a prompt within itself with square tiles:
    qt (qt + 1) / 2 a (sequence, head)); under a sliding window from the tile's first row's window
    start (FA3's `tile_spans` with one query head a tile)."""
    return batch * heads * sum(tile_spans(q_len, 1, bm, bn, kv_len, window))


def window_eta(span: float, t: Any) -> float:
    """The main loop's share of the tensor peak under a binding window, over a query tile's `span`
    key tiles: its two edge tiles (the window's start, the diagonal: both masked) at
    `fmha_window_eta`, the rest at `fmha_eta` (time-weighted)."""
    edge = min(span, 2.0)
    return span / (edge / t.fmha_window_eta + (span - edge) / t.fmha_eta)


def fp8_window_ops(span: float, bm: int, bn: int, t: Any) -> float:
    """The FP8 FMHA under a binding window: fp32 lane-ops a key step adds, `fmha_fp8_mask_ops` per
    score of a query tile's two masked edge tiles spread over its `span` steps."""
    return min(span, 2.0) / span * bm * bn * t.fmha_fp8_mask_ops


def windowed_keys(kv: int, window: int) -> int:
    """The keys a decode kernel that reads a window's tokens only walks: min(kv, window)."""
    return min(kv, window) if window else kv


def fmha_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> LaunchWork:
    t = p.trtllm
    b, q, kv, hq, hk, d, fp8, bm, bn = context_shape(row, cfg)
    elem = 1 if fp8 else FP16
    qt = cdiv(q, bm)
    # the longest CTA walks all kv_len keys
    window = int(cfg.get("window", 0))
    pairs = diagonal_steps(b, q, kv, hq, bm, bn, window)
    ctas = b * hq * qt
    workers = min(ctas, r.sms)
    per_worker = max(math.ceil(pairs / r.sms), max(tile_spans(q, 1, bm, bn, kv, window)))
    span = pairs / (b * hq * qt)
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * bm * bn * d, serial=True,
                mma_dtype="fp8" if fp8 else "fp16",
                mma_eta=t.fmha_fp8_eta if fp8 else window_eta(span, t) if window else t.fmha_eta,
                pipes={"fp32": fp8_window_ops(span, bm, bn, t)} if fp8 and window else {})
    io = elem * b * q * d * hq + prefill_kv_bytes(row, elem)
    out = FP16 * b * q * d * hq
    res = CtaResources(12, 2 * bn * d * elem, bm * d * elem, 2, 168)
    work = KernelWork(trip, Epilogue(out / workers), (per_worker,), "single", workers, workers, res,
                      io, setup_ns=math.ceil(ctas / r.sms) * t.fmha_tile_ns
                      + b * hq * q / workers * t.fmha_row_ns,
                      fixed_ns=t.fmha_scope_us * 1e3, name="trtllm context fmha")
    prep = prep_part(b, q, hq, hk, d, 8 if int(cfg.get("kv_fp8", 0)) else 16, bool(fp8), r, p)
    return [prep, KernelPart(work, Occupancy(1, 2, False, "kernel"))]


def prep_part(batch: int, q_len: int, heads: int, kv_heads: int, head_dim: int, kv_bits: int,
              q_fp8: bool, r: GpuRates, p: SimParams) -> KernelPart:
    """TensorRT-LLM's QKV-preprocessing kernel over batch x q_len new tokens: RoPE on Q and K, the
    K/V appended to the cache (e4m3 for 8 bits), Q written for the attention kernel (e4m3 when
    `q_fp8`). Its blocks cover every query head (mpsim/library/trtllm_attention.py `prep_rounds`,
    the launch read from the source); the time is its rounds of resident blocks at
    `prep_round_ns` a round, the bytes read (Q, K, V in bf16) and written counted for the DRAM."""
    threads, rounds = prep_rounds(batch, q_len, heads, head_dim, r.sms)
    tokens = batch * q_len
    kv_elem = 1 if kv_bits == 8 else FP16
    read = tokens * (heads + 2 * kv_heads) * head_dim * FP16
    written = tokens * head_dim * (heads * (1 if q_fp8 else FP16) + 2 * kv_heads * kv_elem)
    count = min(tokens * heads, r.sms)
    trip = Trip(0.0, 0.0, latency_ns=p.trtllm.prep_round_ns, overlap_latency=True)
    res = CtaResources(max(1, threads // 32), 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(written / count), (rounds,), "single", count, count, res, read,
                      dram_write_bytes=written, name="trtllm qkv preprocessing")
    return KernelPart(work, Occupancy(1, 1, False, "kernel"))


WORK = {TRTLLM_XQA: xqa_work, TRTLLM_MMHA: mmha_work, TRTLLM_FMHA: fmha_work}
