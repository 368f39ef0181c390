"""FlashAttention-3 in vLLM (`fa3_decode`, `fa3_prefill` rows) and vLLM's KV append as CTA work
(names, split heuristic, configs and row builder: mpsim/library/fa3.py).

Rows: `fa3_decode`: op attention, q_len 1, k_bits = v_bits 16 or 8 (8 is FA3's fp8 e4m3 cache: one
byte an element, a per-tensor scale); config `fa3_decode_config`: split_k = FA3's splits,
`kv_append` 0/1 (the op also appended the new token's K/V: a second kernel), `l2_warm` 0/1
(replayed back to back: a KV cache that fits the usable L2 is read from it). `fa3_prefill`: op
attention, 1 < q_len <= kv_len (the queries last), 16-bit K/V, causal; config
`fa3_prefill_config` (`kv_append`).
A row with `kv_append` stands for two kernels (`launch_kernels`).

Decode (pack-GQA): one CTA per (sequence, KV head, KV split) holds the KV head's query group padded
to the wgmma M of 64 rows; splits follow FA3's heuristic (mpsim/library/fa3.py fa3_num_splits).
A CTA walks its split in 128-key tiles; per tile it loads K and V (bf16, or fp8 e4m3: one byte an
element, a per-tensor scale) and, one after another, runs QK^T and PV on the tensor cores (fp8 KV:
the query is cast and both MMAs run at the fp8 rate), the online softmax on the fp32 lanes
(`softmax_ops` per score, padded rows included) and, for fp8, V's transpose for the fp8 wgmma
(`fp8_v_ops` per element). Loads overlap compute (2 stages). When the row is `l2_warm` (the
benchmark replays the op back to back) and the whole KV cache fits the usable L2, it is read from
L2 across replays (decode rows: 33.5 MB caches stream at ~5 TB/s on H200, 67 MB at HBM speed).
Split launches pay the combine of the partial outputs; every launch pays the rest of vLLM's decode
op (`decode_scope_us`).

Prefill (causal): 128-row query tiles visit 128-key tiles up to the diagonal (`causal_tiles`:
qt(qt+1)/2 tile pairs per (sequence, head); with pack-GQA a tile holds the rows of `group` query
heads per token and the (sequence, KV head) is the unit), at `prefill_eta` of the tensor rate plus
each score's exp2 on the SFU, not hidden under the MMAs (`EXP_PER_SCORE`: the rows' time a score is
linear in head_dim; in vLLM's fp8 build only past head_dim 192, with the whole softmax:
`prefill_pipes`); the persistent scheduler deals CTAs longest first, so each SM's share is the
larger of (all pairs / SMs) and the longest CTA, plus a prologue/epilogue per query-tile CTA. A
chunk after cached tokens (q_len < kv_len, vLLM's varlen call with seqused_k and the block table):
its queries are the last q_len positions, so a query tile's keys end at its last row's token plus
the kv_len - q_len cached ones (hopper/block.h get_n_block_min_max: n_block_max = ceil((m_idx_max +
seqlen_k - seqlen_q) / kBlockN), n_block_min 0 without a window); every tile it visits costs a full
trip (the masked tiles on the diagonal as before); the cached K/V are read once from HBM (the same
assumption as the prompt's: re-reads by the other query tiles hit in L2), with the block table's
entries where the row has `kv_block`. Assumed: the paged K/V loads stream at the rate of the
prompt's (no separate cost for the page gather).

KV append (`kv_append` in the config: the measured op also wrote the new tokens' K and V with
reshape_and_cache_flash): one block of min(kv_heads x head_dim, 512) threads per token, latency
bound: rounds of SMs x resident blocks, each round one dependent load/store
(`kv_append_round_ns`). It is its own kernel, run before the attention kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.fa3 import FA3_DECODE, FA3_PREFILL
from mpsim.library.rows import window_first_block
from mpsim.sim.gpu.library.torch import elementwise_part
from mpsim.sim.gpu.memory import replayed_kv_bytes
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16, PAGED_BLOCK_ENTRY

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class Fa3Params:
    """FlashAttention-3 in vLLM (decode rows, prefill rows); SimParams.fa3 (`--fit-params
    fa3.NAME`). Where a value came from: mpsim/sim/params.py's docstring names the row sets."""

    # softmax_ops, cta_ns, decode_scope_us: refitted at stop 38 (Nelder-Mead on MAPE, log space) on
    # 146 status-ok rows (the even half of 150 a class: decode kv16 and fp8-kv) of a stratified draw
    # (seed 23) of every head layout of h200_sxm/attention/vllm/0.24.0/generation_attention_perf
    # .parquet, `--select stacks`; checked on the other half, all of H100's vLLM table and H200's
    # SGLang rows (docs/validation.md "FA3 decode over every head layout")
    softmax_ops: float = 11.44           # fp32 lane-ops per score, padded query rows included
    fp8_v_ops: float = 12.87             # per fp8 V element: the transpose for the fp8 wgmma
    cta_ns: float = 2117.0               # per decode CTA wave: Q load, O write (beyond the first tile)
    decode_scope_us: float = 1.272       # the rest of vLLM's decode attention op (launches, metadata)
    fp8_extra_us: float = 0.376          # fp8 KV: the query cast
    combine_us: float = 2.081            # split-KV: the combine of the partial outputs
    # prefill_eta: refitted at stop 57 with each score's exp2 on the SFU after the MMAs
    # (EXP_PER_SCORE): MAPE scan (0.94-1.0) on the even half of 600 window-0 bf16 `attention
    # prefill` rows (seed 23) of h200_sxm/attention/vllm/0.24.0/context_attention_perf.parquet: 7.64%
    # at 0.97 (0.96-0.98 within 0.02; before, 0.7293 with no exp: 10.87%, head_dim 64 -11.9%, 256
    # +12.0%); odd half 11.13 -> 7.59%, 600 h100_sxm rows 11.31 -> 8.27% (held out)
    prefill_eta: float = 0.97            # share of tensor peak of the causal main loop's MMAs
    # the same at the fp8 rate, FA3's fp8 forward in vLLM's build (an fp8 cache: the query cast by its
    # own kernel first, `q_cast_part`): the MAPE argmin on 300 vLLM 0.24.0 H200
    # `vllm_flash_attn_fa3` context rows with an fp8 cache (window 0, a 600-row sample, seed 23,
    # alternate rows). 0.315 at fp8_tensor_energy 1.0 (0.30-0.53 tried: 13.1-27.0%); refitted with
    # the fp8 cycle's energy at 1.15 (0.315-0.36 tried, stop 34's sample): 0.33 and 0.345 tie at
    # 12.8% (0.345 the smaller bias, -0.5%), 13.8% on the other 300 and 14.8% on 600 H100 rows (held
    # out; at 1.0 and 0.315 the same samples gave 12.6 / 13.6 / 14.8%); SGLang's build has its own
    # (SglangParams.prefill_fp8_eta)
    prefill_fp8_eta: float = 0.345
    prefill_scope_us: float = 2.408      # the rest of vLLM's prefill attention op
    prefill_tile_ns: float = 3830.0      # per query-tile CTA: prologue and epilogue
    kv_append_round_ns: float = 2478.0   # reshape_and_cache_flash: one round of resident blocks
    # a binding sliding window in decode (prefill's tile count alone fits its rows): Nelder-Mead on
    # MAPE over the even half of 800 binding window rows (window 128 / 1024 / 8192, kv16 and fp8-kv,
    # seed 7) of h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet: 10.1% (odd half
    # 9.6%; no window cost: 18.3 / 17.2%, -17% biased); docs/validation.md#sliding-window-attention-stop-44.
    # They are vLLM's op, not FA3's kernel: SGLang's windowed rows fit the tile range with neither
    # (SglangParams.window_*); what vLLM adds is plausibly its full-graph static split cap (32) and
    # the prepare kernel's whole-cache split count, idle splits and their partials (stop 57's note)
    window_mask_ops: float = 54.27       # lane-ops per score of a windowed decode CTA's edge tiles
    window_cta_ns: float = 1570.0        # per windowed decode CTA wave (its window's bounds)


MAX_APPEND_BLOCKS_PER_SM = 32
# the 16-bit causal forward's softmax: one exp2 a score on the SFU (MUFU.EX2, 16 lanes a clock),
# not hidden under the MMAs: the published rows' time a score is linear in head_dim, 4 d / 917
# TFLOP/s + 0.207 ps on H200 (vLLM 0.24.0, window 0, isl 16384: head_dim 64 / 128 / 192 / 256 at
# 527 / 671 / 737 / 772 TFLOP/s), the constant about one ex2 a score (0.24 ps at the 1980 MHz
# boost, 132 SMs); 0.9 and 1.1 price those rows 8.0 / 7.7% against 1.0's 7.6%. SGLang's fp8 build
# follows the same law (H200: head_dim 64 / 128 at 619 / 765 TFLOP/s); vLLM's fp8 forward another
# (head_dim 256 at 449 TFLOP/s, below its bf16: `prefill_pipes`).
EXP_PER_SCORE = 1.0
FP8_PAGED_OVERLAP_MAX_HEAD_DIM = 192   # tile_size.h: e4m3 above 192 over a paged cache, no overlap
SM_THREADS = 2048


def _kv_elem_bytes(bits: int) -> float:
    if bits not in (16, 8):
        raise ValueError(f"FA3 prices 16-bit or fp8 KV caches, got {bits} bits")
    return bits / 8


def kv_write_part(tokens: int, kv_heads: int, head_dim: int, kv_bits: int, blocks: int,
                  per_sm: int, warps: int, r: GpuRates, p: SimParams, name: str,
                  round_ns: float | None = None) -> KernelPart:
    """A kernel writing the new tokens' K and V (bf16 in, the cache's format out), latency bound:
    `blocks` blocks of `warps` warps in rounds of SMs x `per_sm` resident ones, each round one
    dependent load/store (`round_ns`, by default `kv_append_round_ns`)."""
    rounds = cdiv(blocks, r.sms * per_sm)
    count = min(blocks, r.sms)
    written = tokens * kv_heads * head_dim * 2 * _kv_elem_bytes(kv_bits)
    trip = Trip(0.0, 0.0, latency_ns=p.fa3.kv_append_round_ns if round_ns is None else round_ns,
                overlap_latency=True)
    res = CtaResources(warps, 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(written / count), (rounds,), "single", count, count, res,
                      tokens * kv_heads * head_dim * 2 * FP16, name=name)
    return KernelPart(work, Occupancy(1, 1, False, "kernel"))


def kv_append_part(tokens: int, kv_heads: int, head_dim: int, kv_bits: int, r: GpuRates,
                   p: SimParams) -> KernelPart:
    """vLLM's reshape_and_cache_flash: one block of min(kv_heads x head_dim, 512) threads a token."""
    threads = min(kv_heads * head_dim, 512)
    per_sm = min(MAX_APPEND_BLOCKS_PER_SM, SM_THREADS // threads)
    return kv_write_part(tokens, kv_heads, head_dim, kv_bits, tokens, per_sm,
                         max(1, threads // 32), r, p, "kv append")


def q_cast_part(elements: float, r: GpuRates, p: SimParams) -> KernelPart:
    """The query's cast to e4m3 before FA3's fp8 forward (vLLM's scaled_fp8_quant, SGLang's
    `q.to(fp8)`): an elementwise stream of 2 bytes read and 1 written per element, priced as
    PyTorch's vectorized elementwise kernels are (torch.py `elementwise_part`)."""
    return elementwise_part(elements, FP16, 1.0, r, p, "q cast")


AppendPart = Callable[[int, int, int, int, GpuRates, "SimParams"], KernelPart]


def fa3_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                    p: SimParams, resident: float, append: AppendPart = kv_append_part) -> LaunchWork:
    """`append`: the kernel that writes the new tokens' K and V first (vLLM's reshape_and_cache_flash;
    SGLang's store kernel is its room's)."""
    b, kv, hq, hk, d = (int(row[c]) for c in ("batch", "kv_len", "num_q_heads", "num_kv_heads",
                                              "head_dim"))
    bits = int(row["k_bits"])
    elem = _kv_elem_bytes(bits)
    fp8 = bits == 8
    rows, bn, splits = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg.get("split_k", 1))
    window = int(cfg.get("window", 0))
    first, visited = decode_tiles(kv, cfg, bn)
    tiles = cdiv(visited, splits)
    ctas = b * hk * splits
    # a window's masks fall on a CTA's edge tiles (its window start, the cache's end), spread here
    # over the tiles it visits
    mask = p.fa3.window_mask_ops * min(tiles, 2) / tiles if window else 0.0
    lanes = rows * bn * (p.fa3.softmax_ops + mask) + (bn * d * p.fa3.fp8_v_ops if fp8 else 0.0)
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * rows * bn * d,
                pipes={"fp32": lanes}, serial=True, mma_dtype="fp8" if fp8 else "fp16", bulk=True)
    kv_bytes = b * hk * (kv - first * bn) * d * 2 * elem
    q_bytes = b * hq * d * FP16
    reads = q_bytes + kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes, r, p)
    fixed = p.fa3.decode_scope_us * 1e3 + (p.fa3.combine_us * 1e3 if splits > 1 else 0.0) \
        + (p.fa3.fp8_extra_us * 1e3 if fp8 else 0.0)
    res = CtaResources(4, bn * d * 2 * elem, rows * d * FP16, 2, 168)
    work = KernelWork(trip, Epilogue(b * hq * d * FP16 / ctas), (tiles,), "single", ctas, ctas, res,
                      reads, setup_ns=p.fa3.cta_ns + (p.fa3.window_cta_ns if window else 0.0),
                      fixed_ns=fixed, name="fa3 decode")
    parts = [append(b, hk, d, bits, r, p)] if int(cfg.get("kv_append", 0)) else []
    return [*parts, KernelPart(work, Occupancy(1, 2, False, "kernel"))]


def decode_tiles(kv: int, cfg: Mapping[str, int], bn: int) -> tuple[int, int]:
    """(the leading key tiles a decode's sliding window skips, the tiles it visits) over kv keys in
    `bn`-key tiles; the config's `window` (none: all kv_len keys, from the first tile)."""
    first = window_first_block(kv - 1, int(cfg.get("window", 0)), bn)
    return first, max(cdiv(max(kv, 1), bn) - first, 1)


def tile_spans(q: int, group: int, bm: int, bn: int, kv: int | None = None,
               window: int = 0) -> list[int]:
    """Key tiles each causal prefill query tile visits, one (sequence, head): a tile of `bm` rows
    (packed: `group` query heads per token) reaches the keys up to its last row's token, shifted by
    the kv - q cached tokens before the queries (kv None: q, a prompt within itself); with a sliding
    `window` from its first row's window start (`window_first_block`)."""
    before = 0 if kv is None else kv - q
    return [cdiv(min(q, ((j + 1) * bm - 1) // group + 1) + before, bn)
            - window_first_block(j * bm // group + before, window, bn)
            for j in range(cdiv(q * group, bm))]


def causal_grid(per_class: tuple[int, ...], ctas: int, slots: int) -> tuple[tuple[int, ...], str, int]:
    """(trips by class, KernelWork layout, CTAs simulated) of a causal prefill grid whose CTA of
    linear id i walks per_class[i % len(per_class)] key tiles (the grid's x the query tile): in one
    wave (ctas <= slots) every CTA runs its own trips, so the longest sets the time and an SM holds
    only what is dealt to it; over more waves a slot takes the next CTA as it frees, so each of
    `slots` workers runs the larger of (all trips / slots) and the longest CTA."""
    if ctas <= slots:
        return per_class, "inner", ctas
    pairs = sum(per_class) * (ctas // len(per_class))
    return (max(math.ceil(pairs / slots), max(per_class)),), "single", slots


def causal_tiles(q: int, group: int, bm: int, bn: int, kv: int | None = None,
                 window: int = 0) -> int:
    """Key tiles a causal prefill's query tiles visit, one (sequence, head) (`tile_spans`)."""
    return sum(tile_spans(q, group, bm, bn, kv, window))


def prefill_tiles(b: int, q: int, kv: int, hq: int, hk: int, bm: int, bn: int,
                  pack_gqa: bool, window: int = 0) -> tuple[int, int]:
    """(key-tile pairs, CTAs) of a causal prefill over `bm`-row query tiles: a tile holds the query
    group of a KV head when `pack_gqa`, else the rows of one query head."""
    heads = hk if pack_gqa else hq
    group = hq // heads
    return b * heads * causal_tiles(q, group, bm, bn, kv, window), b * heads * cdiv(q * group, bm)


def prefill_pipes(fp8: bool, d: int, bm: int, bn: int, kernel: str, p: SimParams) -> dict[str, float]:
    """A causal forward tile's softmax lanes that do not hide under its MMAs: each score's exp2
    (`EXP_PER_SCORE`) in the 16-bit forward and in SGLang's fp8 build; in vLLM's fp8 forward none,
    except past head_dim 192, where FA3 runs it without IntraWGOverlap over a paged cache
    (hopper/tile_size.h at 07602adc: "PagedKV uses more registers so we disabled IntraWGOverlap"),
    so the whole softmax (the exp2 and `softmax_ops` fp32 lane-ops a score) runs between a
    warpgroup's GEMMs."""
    scores = bm * bn
    if not fp8 or kernel != FA3_PREFILL:
        return {"sfu": scores * EXP_PER_SCORE}
    if d > FP8_PAGED_OVERLAP_MAX_HEAD_DIM:
        return {"sfu": scores * EXP_PER_SCORE, "fp32": scores * p.fa3.softmax_ops}
    return {}


def prefill_kv_bytes(row: Mapping[str, Any], elem: float) -> float:
    """K and V of a prefill row's kv_len keys over its batch and KV heads, `elem` bytes an element,
    plus the block table's entries where the row reads a paged cache (`kv_block`)."""
    b, kv, hk, d = (int(row[c]) for c in ("batch", "kv_len", "num_kv_heads", "head_dim"))
    block = row.get("kv_block")
    table = b * cdiv(kv, int(block)) * PAGED_BLOCK_ENTRY if block is not None and block == block else 0
    return b * hk * kv * d * 2 * elem + table


def fa3_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                     p: SimParams, resident: float, append: AppendPart = kv_append_part) -> LaunchWork:
    b, q, kv, hq, hk, d = (int(row[c]) for c in ("batch", "q_len", "kv_len", "num_q_heads",
                                                 "num_kv_heads", "head_dim"))
    bm, bn, splits = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg.get("split_k", 1))
    bits = int(row["k_bits"])
    elem, fp8 = _kv_elem_bytes(bits), bits == 8
    window = int(cfg.get("window", 0))
    pairs, tiles = prefill_tiles(b, q, kv, hq, hk, bm, bn, bool(int(cfg.get("pack_gqa", 0))), window)
    ctas = tiles * splits
    workers = min(ctas, r.sms)
    group = hq // (hk if int(cfg.get("pack_gqa", 0)) else hq)
    longest = max(tile_spans(q, group, bm, bn, kv, window))
    per_worker = max(math.ceil(pairs / r.sms), cdiv(longest, splits))
    # an fp8 cache: FA3's fp8 forward (Q cast to e4m3 first, both MMAs at the fp8 rate; V's
    # transpose for the fp8 wgmma runs in the producer warps, overlapped) at its own share of peak
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * bm * bn * d, serial=True,
                mma_eta=p.fa3.prefill_fp8_eta if fp8 else p.fa3.prefill_eta,
                mma_dtype="fp8" if fp8 else "fp16", bulk=True,
                pipes=prefill_pipes(bool(fp8), d, bm, bn, str(row["kernel"]), p))
    # Q and the kv_len keys' K, V read once (re-reads of K/V hit in L2)
    io = FP16 * b * q * d * hq + prefill_kv_bytes(row, elem)
    out = FP16 * b * q * d * hq
    fixed = p.fa3.prefill_scope_us * 1e3 + (p.fa3.combine_us * 1e3 if splits > 1 else 0.0)
    res = CtaResources(12, 2 * bn * d * elem, bm * d * FP16, 2, 168)
    work = KernelWork(trip, Epilogue(out / workers), (per_worker,), "single", workers, workers, res,
                      io, setup_ns=math.ceil(ctas / r.sms) * p.fa3.prefill_tile_ns, fixed_ns=fixed,
                      name="fa3 prefill")
    parts = [append(b * q, hk, d, bits, r, p)] if int(cfg.get("kv_append", 0)) else []
    if fp8 and row["kernel"] == FA3_PREFILL:  # vLLM's scaled_fp8_quant of the query, its own kernel
        parts.append(q_cast_part(float(b * q * hq * d), r, p))
    return [*parts, KernelPart(work, Occupancy(1, 2, False, "kernel"))]


WORK = {FA3_DECODE: fa3_decode_work, FA3_PREFILL: fa3_prefill_work}
