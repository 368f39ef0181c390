"""FlashAttention-2 in vLLM on Ampere/Ada (`fa2_decode`, `fa2_prefill` rows) as CTA work (names,
split heuristic, configs and row builder: mpsim/library/fa2.py, which cites the source files).

Both run FA2's split-KV kernel (vLLM's calls are paged): a CTA of 4 warps holds a 64-row query tile
(decode with GQA: the KV head's query group, padded; MHA decode: one live row) and walks its keys in
kBlockN-key tiles. Per tile it loads K and V (cp.async into one K and one V buffer: the V load
overlaps QK^T, the next K load overlaps PV), runs QK^T and PV as mma.sync m16n8k16 (each warp its
16 rows against the whole tile: every warp reads all of K and V from shared memory, the operand
traffic `smem_bytes`), and the online softmax on the fp32 lanes (`softmax_ops` per score, padded
rows included). The MMAs reach `mma_eta` of the tensor rate (mma.sync issue from 4 warps).
Occupancy follows from the tile's shared memory (Q + K + V) and 255 registers a thread
(flash_fwd_launch_template.h sets the max dynamic smem; 128 threads).

Decode: one CTA per (query tile, split, sequence x head); splits > 1 add FA2's combine kernel
(`combine_us`). A decode CTA's fixed work (`cta_ns`: block-table walk, Q load, the 64-row tile's
epilogue and O write) holds its SM: co-resident CTAs do not overlap it (stop 45: the L40S rows price
a CTA at the same SM time at two resident CTAs an SM as at one, ~4.5 us at head_dim 64 with a
covering window or without one; as an overlapped prologue the model ran wide grids 16-28% fast).
Prefill (causal, `prefill_eta`): query tile j of 64 rows visits the key tiles up to
its last row; a grid of one wave runs each CTA's own tiles (fa3.causal_grid: the longest sets the
time), more waves are dealt over the slots (SMs x CTAs an SM), so a slot's share is the larger of
(all tile pairs / slots) and the longest CTA; a prologue per CTA it runs. A
chunk after cached tokens (q_len < kv_len): the queries are the last q_len positions, so tile j
reaches min(q_len, 64 (j + 1)) + kv_len - q_len keys (flash_fwd_kernel.h
compute_attn_1rowblock_splitkv: n_block_max = ceil(((m_block + 1) kBlockM + seqlen_k - seqlen_q) /
kBlockN)), each visited tile a full trip, and the cached K/V are read once (FA3's assumption).
Every launch pays the rest of vLLM's attention op (`decode_scope_us`,
`prefill_scope_us`); a `kv_append` row also runs vLLM's reshape_and_cache_flash first (FA3's room,
the same kernel). A KV cache (prefill: Q, K and V) that fits the usable L2 is read from it across
a benchmark's back-to-back replays (`l2_warm`, as FA3's decode). Constants: Fa2Params (SimParams.fa2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.fa2 import FA2_DECODE, FA2_PREFILL
from mpsim.sim.gpu.library.fa3 import (
    causal_grid,
    decode_tiles,
    kv_append_part,
    prefill_kv_bytes,
    tile_spans,
)
from mpsim.sim.gpu.memory import replayed_kv_bytes, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FA2_REGS = 255        # FA2's forward kernels run at the register cap with 128 threads


@dataclass(frozen=True)
class Fa2Params:
    """FlashAttention-2 in vLLM (SimParams.fa2, `--fit-params fa2.NAME`); where each value came
    from: docs/validation.md "FlashAttention-2 and FlashInfer (vLLM off Hopper)"."""

    softmax_ops: float = 7.462           # fp32 lane-ops per score (FA3's count: the same online softmax)
    mma_eta: float = 0.7831              # share of the mma.sync peak the decode loop reaches
    cta_ns: float = 2186.5               # per CTA, its SM's alone: block-table walk, Q load, O write
    decode_scope_us: float = 0.0         # the rest of vLLM's decode attention op
    combine_us: float = 2.081            # split-KV: the combine kernel (FA3's, not refitted)
    # share of the mma.sync peak the causal prefill loop reaches, and per CTA a slot runs (prologue,
    # epilogue): refitted at stop 48 with one-wave grids running each CTA's own tiles (causal_grid;
    # 0.5887 / 879.2 before), Nelder-Mead on the even half of an 800-row stratified sample (seed 7)
    # of the L40S vLLM 0.24.0 FA2 prefill rows: even 20.6 -> 16.9%, odd (not fitted) 19.3 -> 17.8%
    prefill_eta: float = 0.8123
    prefill_tile_ns: float = 1531.7
    prefill_scope_us: float = 0.0        # the rest of vLLM's prefill attention op


def _resources(bm: int, bn: int, d: int) -> CtaResources:
    return CtaResources(4, bn * d * 2 * FP16, bm * d * FP16, 1, FA2_REGS)


def _occupancy(res: CtaResources, r: GpuRates) -> Occupancy:
    """CTAs an SM by the tile's smem and registers; loads overlap compute (separate K and V buffers)."""
    occ = occupancy(res, r)
    return Occupancy(occ.ctas_per_sm, 2, False, occ.limiter)


def _trip(bm: int, bn: int, d: int, p: SimParams, elem: float = FP16) -> Trip:
    return Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * bm * bn * d,
                pipes={"fp32": bm * bn * p.fa2.softmax_ops}, serial=True,
                mma_eta=p.fa2.mma_eta, smem_bytes=4 * bn * d * 2 * FP16)


def fa2_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                    p: SimParams, resident: float) -> LaunchWork:
    b, kv, hq, hk, d = (int(row[c]) for c in ("batch", "kv_len", "num_q_heads", "num_kv_heads",
                                              "head_dim"))
    bm, bn, splits = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg.get("split_k", 1))
    ctas = 1
    for g in grid:
        ctas *= int(g)
    first, visited = decode_tiles(kv, cfg, bn)   # a sliding window's skipped and visited tiles
    tiles = cdiv(visited, splits)
    kv = kv - first * bn                 # the keys read
    kv_bytes = b * hk * kv * d * 2 * FP16
    # MHA: every query head reads its own K/V; GQA: each KV head's once (its group is one tile)
    reads = b * hq * d * FP16 + kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes, r, p)
    fixed = p.fa2.decode_scope_us * 1e3 + (p.fa2.combine_us * 1e3 if splits > 1 else 0.0)
    res = _resources(bm, bn, d)
    # the chip's L2 serves the cached tokens only: the last tile's rows past kv_len are zero-filled
    # (cp.async with no source bytes), while the port's count keeps whole tiles as fitted
    trip = replace(_trip(bm, bn, d, p), l2_bytes=max(kv, 1) / (splits * tiles) * d * 2 * FP16)
    work = KernelWork(trip, Epilogue(b * hq * d * FP16 / ctas, latency_ns=p.fa2.cta_ns), (tiles,), "single",
                      ctas, ctas, res, reads, fixed_ns=fixed, name="fa2 decode")
    parts = [kv_append_part(b, hk, d, 16, r, p)] if int(cfg.get("kv_append", 0)) else []
    return [*parts, KernelPart(work, _occupancy(res, r))]


def fa2_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                     p: SimParams, resident: float) -> LaunchWork:
    b, q, kv, hq, hk, d = (int(row[c]) for c in ("batch", "q_len", "kv_len", "num_q_heads",
                                                 "num_kv_heads", "head_dim"))
    bm, bn = int(cfg["block_m"]), int(cfg["block_n"])
    m_blocks = cdiv(q, bm)
    res = _resources(bm, bn, d)
    occ = _occupancy(res, r)
    # query tile j visits the key tiles up to its (shifted) diagonal; the grid's x is the query tile
    spans = tile_spans(q, 1, bm, bn, kv, int(cfg.get("window", 0)))
    ctas = m_blocks * b * hq
    iters, layout, workers = causal_grid(tuple(spans), ctas, r.sms * occ.ctas_per_sm)
    # Q and the kv_len keys' K, V read once (re-reads of K/V hit in L2)
    io = FP16 * b * q * d * hq + prefill_kv_bytes(row, FP16)
    if int(cfg.get("l2_warm", 0)) and io <= usable_l2(r, p):
        io = 0.0                            # replayed: Q, K, V still in L2
    trip = replace(_trip(bm, bn, d, p), mma_eta=p.fa2.prefill_eta)
    work = KernelWork(trip, Epilogue(FP16 * q * d * b * hq / workers), iters, layout, 1, workers,
                      res, io, setup_ns=cdiv(ctas, workers) * p.fa2.prefill_tile_ns,
                      fixed_ns=p.fa2.prefill_scope_us * 1e3, name="fa2 prefill")
    parts = [kv_append_part(b * q, hk, d, 16, r, p)] if int(cfg.get("kv_append", 0)) else []
    return [*parts, KernelPart(work, occ)]


WORK = {FA2_DECODE: fa2_decode_work, FA2_PREFILL: fa2_prefill_work}
