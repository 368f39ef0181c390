"""vLLM's Triton attention backend (`vllm_triton_decode`, `vllm_triton_prefill` rows) as CTA work
(names, dispatch, tiles, configs and the row builder: mpsim/library/vllm_triton.py, which cites the
source files).

The op: vLLM's KV write (triton_reshape_and_cache_flash: programs of 16 warps over (token, a tile of
its K/V elements), each one dependent load and store, `store_cycles` a round of resident ones:
fa3.kv_write_part), then `kernel_unified_attention`. Every CTA of its grid first finds its sequence
by a binary search over the query starts (`search_steps` dependent loads, `search_cycles` each);
the spare q blocks (T // BLOCK_Q + num_seqs are launched) and the 3D form's segments past the keys
then return, costing their SM slot the search (`fixed_ns`), and the SMs take every CTA at
`dispatch_cycles` a CTA. A CTA with keys loads its lengths and Q (`cta_cycles`) and walks its key
tiles: the block-table entries, K and V (software-pipelined: cp.async into num_stages - 1 = 2
buffers, so the round trips hide behind the previous tile), QK^T and PV as tl.dot (16-row tiles on
mma.sync at `mma_eta` of the tensor rate, fp8 over an fp8 cache) and, on the fp32 lanes, the tile's
addressing, masks and conversions over the head_dim padded to a power of two (`elem_ops` a K/V
element; a CTA alone on its SM reaches `lone_share` of the issue rate), the online softmax and the
accumulator's rescale.
- Decode, 3D (batch <= seq_threshold_3D): 16 segments a (sequence, KV head), each its slice of the
  tiles, their fp32 partials kept in L2; then `reduce_segments`, a CTA per (token, query head)
  searching its sequence and merging the partials (`merge_cycles`). 2D: one CTA a (sequence, KV
  head) over all its tiles, writing the output itself.
- Prefill: a CTA per (BLOCK_Q query tokens, KV head) walks the tiles up to its last token (FA's
  causal span: fa3.tile_spans, the same formula), the grid's SM slots sharing them over waves
  (fa3.causal_grid), at `prefill_elem_ops` lanes a K/V element.
Constants: VllmTritonParams (SimParams.vllm_triton), fitted on the even rows of both GPUs that
measured the backend (L40S and B200, vLLM 0.24.0, kernel_source vllm_triton_attn), in SM cycles;
docs/validation.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv, next_pow2
from mpsim.library.vllm_triton import VLLM_TRITON_DECODE, VLLM_TRITON_PREFILL, segment_trips
from mpsim.sim.gpu.library.fa3 import causal_grid, kv_write_part, tile_spans
from mpsim.sim.gpu.memory import replayed_kv_bytes
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4
TABLE_BYTES = 4          # block_tables entries (int32), one load a key
SOFTMAX_OPS = 8.0        # fp32 lane-ops per score of the online softmax (max, exp, sum, mask)
APPEND_WARPS = 16        # triton_reshape_and_cache_flash: num_warps 16 on CUDA (its programs 4 an SM)


@dataclass(frozen=True)
class VllmTritonParams:
    """vLLM's Triton attention backend (SimParams.vllm_triton, `--fit-params vllm_triton.NAME`);
    fitted on the even rows of l40s/ and b200_sxm/attention/vllm/0.24.0 (kernel_source
    vllm_triton_attn), both GPUs together (docs/validation.md#vllms-triton-attention-backend-stop-56).
    Fixed costs are SM cycles: the two GPUs' rows scale with their clocks (B200 / L40S time 1.3-1.4x
    at the floors and over the CTA-bound batches, their clock ratio 1.27), not with one latency in
    ns."""

    # decode: Nelder-Mead on MAPE (log space) over every 8th even row (140 a GPU) of the 2,228
    # generation rows (kernel_source vllm_triton_attn) of l40s/ and of b200_sxm/attention/vllm/
    # 0.24.0/generation_attention_perf.parquet, both GPUs at once: even 13.7%, odd 14.4% (mma_eta
    # held at its cap 1.0: the fit leaves it unbound, the dots' time negligible beside the lanes')
    elem_ops: float = 17.02              # fp32 lane-ops per padded K/V element of a decode tile
    lone_share: float = 0.8202           # of the SM's issue rate, what a CTA alone on its SM reaches
    mma_eta: float = 1.0                 # the 16-row dots' share of the tensor rate (its cap)
    store_cycles: float = 4510.0         # the KV write's round of resident programs
    search_cycles: float = 142.6         # per step of a CTA's binary search (one dependent load)
    cta_cycles: float = 34.06            # per CTA with keys beyond its search: lengths, Q, output
    merge_cycles: float = 66.11          # per reduce_segments CTA beyond its search: the partials
    dispatch_cycles: float = 209.9       # per CTA an SM takes (the grid's returning ones included)
    # prefill: the same fit of this one constant over every 4th even row (204 a GPU) of the 1,632
    # context rows of each GPU's context_attention_perf.parquet, with the decode constants above:
    # even 14.4%, odd 14.5%
    prefill_elem_ops: float = 13.18      # the same in prefill (its SMs hold more CTAs: more ILP)


def _elem(row: Mapping[str, Any]) -> float:
    return 1.0 if int(row["k_bits"]) == 8 else float(FP16)


def _ns(cycles: float, r: GpuRates) -> float:
    return cycles / r.clock_hz * 1e9


def search_steps(num_seqs: int) -> int:
    """Dependent loads of find_seq_idx's binary search over the sequences' query starts (every CTA
    runs it first, the ones that then return included)."""
    return max(1, int(num_seqs).bit_length())


def fixed_ns(launched: int, idle: int, steps: int, resident: int, r: GpuRates, p: SimParams) -> float:
    """Outside the working CTAs: the SMs take all `launched` CTAs one at a time each (`dispatch_cycles`
    a CTA), and the `idle` ones (spare q blocks, segments past the keys) search, then return
    (`steps` x `search_cycles` each, `resident` of them an SM at a time)."""
    take = cdiv(launched, r.sms) * p.vllm_triton.dispatch_cycles
    idle_rounds = cdiv(idle, r.sms * max(1, resident)) * steps * p.vllm_triton.search_cycles
    return _ns(take + idle_rounds, r)


def tile_trip(row: Mapping[str, Any], cfg: Mapping[str, int], p: SimParams, lone: bool,
              elem_ops: float) -> Trip:
    """One key tile of a CTA: the block-table entries, K and V (head_dim of them, padded lanes
    masked), both dots over the padded head_dim, the lanes' work (`elem_ops` a K/V element;
    `lone`: the CTA alone on its SM, its four warps one a scheduler, each instruction waiting on
    its predecessor: `lone_share` of the issue rate). The loads are software-pipelined (cp.async,
    num_stages - 1 buffers)."""
    d, elem = int(row["head_dim"]), _elem(row)
    bm, bn, bd = (int(cfg[k]) for k in ("block_m", "block_n", "block_k"))
    s = p.vllm_triton
    lanes = bn * bd * 2 * elem_ops + bm * bn * SOFTMAX_OPS + bm * bd
    return Trip(bn * d * 2 * elem + bn * TABLE_BYTES, 4.0 * bm * bn * bd,
                pipes={"fp32": lanes / (s.lone_share if lone else 1.0)}, serial=True,
                mma_dtype="fp8" if int(cfg.get("fp8", 0)) else "fp16", mma_eta=s.mma_eta)


def _resources(cfg: Mapping[str, int], elem: float, r: GpuRates) -> CtaResources:
    bm, bn, bd, warps = (int(cfg[k]) for k in ("block_m", "block_n", "block_k", "num_warps"))
    buffers = max(1, int(cfg.get("num_stages", 2)) - 1)  # Triton's mma.sync pipeliner: stages - 1
    return CtaResources(warps, 2 * bn * bd * elem, bm * bd * elem, buffers,
                        registers_per_thread(bm * bd, bm * bd + 2 * bn * bd, warps * 32,
                                             r.max_regs_per_thread))


def append_tile(elements: int, r: GpuRates) -> int:
    """triton_reshape_and_cache_flash's TILE_SIZE: a token's K (and V) elements up to 2,048 a
    program, 512 below sm_90 (Ampere-class SMs, sass_arch sm_80: A100, Ada); the grid is (tokens,
    cdiv(KV heads x head_dim, TILE_SIZE))."""
    tile = min(2048, next_pow2(elements))
    return min(512, tile) if r.sass_arch == "sm_80" else tile


def _append(row: Mapping[str, Any], cfg: Mapping[str, int], tokens: int, r: GpuRates,
            p: SimParams) -> list[KernelPart]:
    if not int(cfg.get("kv_append", 0)):
        return []
    hk, d = int(row["num_kv_heads"]), int(row["head_dim"])
    programs = tokens * cdiv(hk * d, append_tile(hk * d, r))
    return [kv_write_part(tokens, hk, d, int(row["k_bits"]), programs, 2048 // (32 * APPEND_WARPS),
                          APPEND_WARPS, r, p, "kv append", round_ns=_ns(p.vllm_triton.store_cycles, r))]


def vllm_triton_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                            r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    b, kv, hq, hk, d = (int(row[c]) for c in ("batch", "kv_len", "num_q_heads", "num_kv_heads",
                                              "head_dim"))
    s, elem = p.vllm_triton, _elem(row)
    bn, bd, segments, live = (int(cfg[k]) for k in ("block_n", "block_k", "segments", "split_k"))
    trips = segment_trips(kv, bn, segments, int(cfg.get("window", 0)))
    kv_bytes = b * hk * sum(trips) * bn * d * 2 * elem
    misses = kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes, r, p)
    res = _resources(cfg, elem, r)
    occ = occupancy(res, r)
    launched = int(grid[0]) * hk * segments
    ctas = b * hk * segments        # a sequence's q block and KV head, every segment
    working = sum(1 for t in trips if t)   # segments with tiles (a window leaves one or two)
    trip = tile_trip(row, cfg, p, b * hk * working <= r.sms, s.elem_ops)
    steps = search_steps(b)
    # a CTA with keys: its search, then its lengths, Q and output (partials), `cta_cycles`; the
    # segments past the keys (ctas - live share) return after their search
    setup = _ns(steps * s.search_cycles + s.cta_cycles * live / segments, r)
    # a CTA stores its query's rows (the group's heads; the block's other rows are masked): the 3D
    # form's fp32 partials with their maxima and sums, which stay in L2 for reduce_segments (a
    # replay rewrites the same buffer), or the 2D form's output
    group = hq // hk
    out = float(group * (bd + 2) * FP32) if segments > 1 else float(group * d * FP16)
    attn = KernelWork(trip, Epilogue(out * live / segments), trips, "outer", b * hk, ctas, res,
                      misses + b * hq * d * elem, setup_ns=setup, resident_split=occ.ctas_per_sm,
                      fixed_ns=fixed_ns(launched, launched - ctas, steps, occ.ctas_per_sm, r, p),
                      dram_write_bytes=0.0 if segments > 1 else None,
                      l2_kept_stores=1.0 if segments > 1 else 0.0, name="vllm triton unified attention")
    parts = [*_append(row, cfg, b, r, p), KernelPart(attn, occ)]
    if segments == 1:
        return parts
    # reduce_segments: a CTA per (token, query head) searches its sequence, then loads the live
    # segments' maxima, sums and partials (in L2) and merges them
    merge = KernelWork(Trip(live * (bd + 2) * FP32, 0.0,
                            latency_ns=_ns(steps * s.search_cycles + s.merge_cycles, r)),
                       Epilogue(d * FP16), (1,), "single", b * hq, b * hq,
                       CtaResources(4, 0.0, 0.0, 1, 32), 0.0,
                       fixed_ns=fixed_ns(b * hq, 0, steps, 1, r, p), name="vllm triton reduce segments")
    return [*parts, KernelPart(merge, Occupancy(16, 1, False, "kernel"))]


def vllm_triton_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                             r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    b, q, hq, hk, d = (int(row[c]) for c in ("batch", "q_len", "num_q_heads", "num_kv_heads",
                                             "head_dim"))
    s, elem = p.vllm_triton, _elem(row)
    bn, rows = int(cfg["block_n"]), int(cfg["rows"])
    group = hq // hk
    spans = tile_spans(q, group, rows, bn, window=int(cfg.get("window", 0)))
    res = _resources(cfg, elem, r)
    occ = occupancy(res, r)
    ctas = b * hk * len(spans)
    iters, layout, workers = causal_grid(tuple(spans), ctas, r.sms * occ.ctas_per_sm)
    kv_bytes = b * q * hk * d * 2 * elem   # the prompt's K and V once; their re-reads hit in L2
    trip = tile_trip(row, cfg, p, ctas <= r.sms, s.prefill_elem_ops)
    io = b * q * hq * d * elem + kv_bytes
    steps = search_steps(b)
    launched = int(grid[0]) * hk
    setup = ctas * _ns(steps * s.search_cycles + s.cta_cycles, r) / workers
    attn = KernelWork(trip, Epilogue(b * q * hq * d * FP16 / workers), iters, layout, 1, workers, res,
                      io, setup_ns=setup, resident_split=occ.ctas_per_sm,
                      fixed_ns=fixed_ns(launched, launched - ctas, steps, occ.ctas_per_sm, r, p),
                      name="vllm triton unified attention")
    return [*_append(row, cfg, b * q, r, p),
            KernelPart(attn, occ)]


WORK = {VLLM_TRITON_DECODE: vllm_triton_decode_work, VLLM_TRITON_PREFILL: vllm_triton_prefill_work}
