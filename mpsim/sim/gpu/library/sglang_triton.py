"""SGLang's Triton attention backend (`sglang_triton_decode`, `sglang_triton_prefill` rows) as CTA
work (names, split heuristic, configs and row builder: mpsim/library/sglang_triton.py, which cites
the source files).

Decode, three kernels: SGLang's KV store (sglang.py's `store_part` at this op's own round,
`store_round_ns`; an fp8 cache first casts the new K and V, two PyTorch elementwise kernels), then:
- stage 1: every CTA of the grid (batch, head blocks, 8 splits) reads its split's bounds; the ones
  with keys (split_k of the 8 per sequence) load Q and walk their split in block_n-key tiles. A tile
  is a chain: the keys' slots from kv_indices (a round trip), then the gathered K and V rows,
  `decode_inflight_bytes` in flight at a time (a round trip each to the L2, or to HBM for the
  misses: the gather is not software-pipelined), QK^T and PV (GQA: a 16-row
  tl.dot on the tensor cores at mma.sync's share `decode_mma_eta`; MHA: CUDA-core dots), the
  online softmax and the tile's addressing and conversions on the fp32 lanes (`decode_elem_ops`
  per K/V element); then the split's partial output. Co-resident CTAs run as processes of their
  own (one's round trips overlap another's work). Empty splits exit; every CTA costs its SM
  `dispatch_ns` (the SMs take the grid's CTAs at that rate, outside their work).
- stage 2: a CTA per (sequence, query head) merges the splits' partials (`merge_ns`).
Prefill, the extend kernel after the store (SGLang clones k and v before storing them): a CTA per
(sequence, query head, BLOCK_M-row query tile) walks the key tiles up to its diagonal (one stage:
one tile buffer), QK^T and PV as tl.dot at the kernel's share of the tensor rate: the tiles
are large for the register file at head_dim 256-512 (a 128 x 256 fp32 accumulator is 128 registers
a thread at 8 warps), and the measured share differs by compiled variant (`prefill_eta_*`: the
head_dim class, and the cache's dtype, which the kernel's specialization on its K/V buffers
changes even without a cached prefix). Over more than one wave the SM slots share the tiles
(fa3.causal_grid), each slot paying its share of the query tiles' prologues (`prefill_tile_ns`) and,
under a sliding window, of the skipped tiles' masks (`skip_ns`). Constants: SglangTritonParams
(SimParams.sglang_triton), fitted on even rows of h200_sxm/attention/sglang/0.5.14 (kernel_source
triton); docs/validation.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.rows import window_first_block
from mpsim.library.sglang_triton import MAX_KV_SPLITS, SGLANG_TRITON_DECODE, SGLANG_TRITON_PREFILL
from mpsim.sim.gpu.library.fa3 import causal_grid, tile_spans
from mpsim.sim.gpu.library.sglang import store_part
from mpsim.sim.gpu.library.torch import elementwise_part
from mpsim.sim.gpu.memory import replayed_kv_bytes
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4
SLOT_BYTES = 8           # kv_indices entries (int64)
SOFTMAX_OPS = 8.0        # fp32 lane-ops per score of the online softmax (max, exp, sum, rescale)


@dataclass(frozen=True)
class SglangTritonParams:
    """SGLang's Triton attention backend (SimParams.sglang_triton, `--fit-params
    sglang_triton.NAME`); fitted on the H200 SGLang 0.5.14 rows (kernel_source triton), the even
    half of each class (docs/validation.md#sglangs-triton-attention-backend-stop-55)."""

    # decode: Nelder-Mead on MAPE (log space) over the even rows (1,646) of the 3,292 generation
    # rows (kernel_source triton) of h200_sxm/attention/sglang/0.5.14/
    # generation_attention_perf.parquet: even 15.2%, odd 15.4% (decode_mma_eta set to 1.0 where the
    # fit left it unbound at 8.9: the dots' time is negligible beside the tile's). The fixed costs'
    # argmins sit at their floor (store round, Q load, merge): the graph protocol's per-kernel cost
    # (1.18 us gap + the 0.73 us floor) already exceeds what these kernels add in SGLang's graph
    store_round_ns: float = 0.5729        # the KV store's round of resident blocks (its op's own)
    decode_inflight_bytes: float = 11910.0  # gathered K/V bytes a stage-1 CTA keeps in flight
    decode_elem_ops: float = 17.31       # fp32 lane-ops per K/V element of a GQA decode tile
    decode_mha_elem_ops: float = 13.21   # the same, MHA (its QK^T and PV on the CUDA cores)
    decode_mma_eta: float = 1.0          # the grouped dot's share of the tensor rate (its cap: the
    #                                      fit leaves it unbound above, the dots' time negligible)
    decode_cta_ns: float = 48.93          # per stage-1 CTA with keys: bounds, Q load, partial write
    dispatch_ns: float = 90.58           # per CTA an SM takes (stage 1's empty splits included)
    merge_ns: float = 1.555              # per stage-2 CTA: the splits' partials merged
    # prefill: the same fit over every other even row (867) of the 3,468 context rows (kernel_source
    # triton) of h200_sxm/attention/sglang/0.5.14/context_attention_perf.parquet (refitted with the
    # shipped decode constants): all even rows 22.8%, odd 23.4%. The extend loop's share of the
    # tensor rate by compiled variant: head_dim <= 256 or above, and a bf16 cache, an fp8 cache
    # (bf16 compute), or fp8 compute (q, k, v in e4m3: the fp8 rate)
    prefill_eta_256: float = 0.1177
    prefill_eta_256_fp8kv: float = 0.2308
    prefill_eta_256_fp8: float = 0.07405
    prefill_eta_512: float = 0.1153
    prefill_eta_512_fp8kv: float = 0.06943
    prefill_eta_512_fp8: float = 0.05828
    prefill_tile_ns: float = 51.72       # per query-tile CTA: Q load, O write
    skip_ns: float = 5277.0              # per key tile outside a window: its mask, then skipped


def _elem(row: Mapping[str, Any]) -> float:
    return 1.0 if int(row["k_bits"]) == 8 else float(FP16)


def dispatch_ns(ctas: int, r: GpuRates, p: SimParams) -> float:
    """The SMs take a launch's CTAs one at a time each (`dispatch_ns` a CTA, whether it has work or
    exits at once: stage 1's empty splits), outside the CTAs' own work."""
    return cdiv(ctas, r.sms) * p.sglang_triton.dispatch_ns


def store_parts(tokens: int, kv_heads: int, head_dim: int, kv_bits: int, r: GpuRates, p: SimParams,
                *, clone: float = 0.0, cast: bool = False) -> list[KernelPart]:
    """SGLang's KV store for `tokens` new tokens: (prefill) k and v cloned, `clone` bytes an element
    (0: none), (`cast`: bf16 K/V into an fp8 cache) k and v cast to e4m3, then the store kernel."""
    n = float(tokens * kv_heads * head_dim)
    parts = [elementwise_part(n, clone, clone, r, p, "kv clone") for _ in range(2)] if clone else []
    if cast:
        parts += [elementwise_part(n, FP16, 1.0, r, p, "kv cast") for _ in range(2)]
    return [*parts, store_part(tokens, kv_heads, head_dim, kv_bits, r, p,
                               round_ns=p.sglang_triton.store_round_ns)]


def sglang_triton_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                              r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    b, hq, hk, d = (int(row[c]) for c in ("batch", "num_q_heads", "num_kv_heads", "head_dim"))
    s, elem = p.sglang_triton, _elem(row)
    rows, bn, bd, used = (int(cfg[k]) for k in ("block_m", "block_n", "block_k", "split_k"))
    keys, per = int(cfg["keys"]), int(cfg["split_keys"])
    blocks = int(grid[1])
    trips = tuple(cdiv(max(0, min(per, keys - j * per)), bn) for j in range(MAX_KV_SPLITS))
    tile = bn * d * 2 * elem
    mma = 4.0 * rows * bn * bd if rows > 1 else 0.0   # a GQA group's 16-row dots; MHA on CUDA cores
    # GQA: the tile's addressing and layout conversions for tl.dot; MHA: its dots on CUDA cores
    elem_ops = s.decode_elem_ops if rows > 1 else s.decode_mha_elem_ops
    lanes = bn * bd * 2 * elem_ops + max(rows, 1) * bn * SOFTMAX_OPS
    kv_bytes = b * hk * keys * d * 2 * elem
    misses = kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes, r, p)
    reads = misses + b * hq * d * FP16
    # the slots' round trip, then the gathered rows `decode_inflight_bytes` at a time, each a round
    # trip to where the cache sits (L2 when a replay keeps it there, else HBM), not overlapped with
    # the tile's math (the loop is a chain: `overhead_cycles`, where the pipelined trips of the
    # memory model would hide it)
    miss = misses / kv_bytes if kv_bytes else 0.0
    round_cycles = r.l2_latency + miss * max(0.0, r.dram_latency - r.l2_latency)
    trip = Trip(tile + bn * SLOT_BYTES, mma, pipes={"fp32": lanes}, serial=True,
                mma_eta=s.decode_mma_eta, latency_ns=round_cycles / r.clock_hz * 1e9,
                overhead_cycles=tile / s.decode_inflight_bytes * round_cycles)
    active = b * blocks * used
    ctas = b * blocks * MAX_KV_SPLITS
    setup = active * s.decode_cta_ns / ctas
    partial = float(min(rows, hq) * (bd + 1) * FP32)
    res = CtaResources(4, tile, rows * bd * FP16, 1,
                       registers_per_thread(max(rows, 1) * bd, 3 * bn * bd, 128, r.max_regs_per_thread))
    occ = occupancy(res, r)
    # co-resident CTAs as processes of their own: one's gather round trips overlap another's work
    stage1 = KernelWork(trip, Epilogue(partial * active / ctas), trips, "outer", b * blocks, ctas, res,
                        reads, setup_ns=setup, resident_split=occ.ctas_per_sm,
                        fixed_ns=dispatch_ns(ctas, r, p), name="sglang triton decode stage 1")
    # stage 2: a CTA loads its (sequence, head)'s partials (in L2) in one round trip, then merges
    merge = KernelWork(Trip(used * (bd + 1) * FP32, 0.0, latency_ns=s.merge_ns), Epilogue(d * FP16),
                       (1,), "single", b * hq, b * hq, CtaResources(4, 0.0, 0.0, 1, 32), 0.0,
                       fixed_ns=dispatch_ns(b * hq, r, p), name="sglang triton decode stage 2")
    return [*store_parts(b, hk, d, int(row["k_bits"]), r, p, cast=bool(int(cfg.get("kv_cast", 0)))),
            KernelPart(stage1, Occupancy(occ.ctas_per_sm, 1, False, occ.limiter)),
            KernelPart(merge, Occupancy(16, 1, False, "kernel"))]


def prefill_eta(d: int, kv_bits: int, fp8: bool, p: SimParams) -> float:
    """The extend loop's share of the tensor rate for its compiled variant."""
    variant = "_fp8" if fp8 else ("_fp8kv" if kv_bits == 8 else "")
    return float(getattr(p.sglang_triton, f"prefill_eta_{256 if d <= 256 else 512}{variant}"))


def prefill_spans(q: int, bm: int, bn: int, window: int) -> list[tuple[int, int]]:
    """(key tiles computed, key tiles skipped) of each query tile of a causal prompt of q tokens:
    FA's tile range (fa3.tile_spans: to its last row's key, from its first row's window start), the
    tiles before that start skipped (rows.window_first_block: their keys are older than every row's
    window)."""
    return [(span, window_first_block(j * bm, window, bn))
            for j, span in enumerate(tile_spans(q, 1, bm, bn, window=window))]


def sglang_triton_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int],
                               r: GpuRates, p: SimParams, resident: float) -> LaunchWork:
    b, q, hq, hk, d = (int(row[c]) for c in ("batch", "q_len", "num_q_heads", "num_kv_heads",
                                             "head_dim"))
    s, bits = p.sglang_triton, int(row["k_bits"])
    bm, bn, bd, warps = (int(cfg[k]) for k in ("block_m", "block_n", "block_k", "num_warps"))
    fp8 = bool(int(cfg.get("fp8", 0)))
    elem = 1.0 if fp8 else float(FP16)      # the prompt's own Q, K, V as handed to the kernel
    spans = prefill_spans(q, bm, bn, int(cfg.get("window", 0)))
    res = CtaResources(warps, 2 * bn * bd * elem, bm * bd * elem, 1,
                       registers_per_thread(bm * bd, bm * bd + 2 * bn * bd, warps * 32,
                                            r.max_regs_per_thread))
    occ = occupancy(res, r)
    ctas = b * hq * len(spans)
    iters, layout, workers = causal_grid(tuple(c for c, _ in spans), ctas, r.sms * occ.ctas_per_sm)
    skipped = b * hq * sum(k for _, k in spans)
    trip = Trip(bn * bd * 2 * elem, 4.0 * bm * bn * bd, pipes={"fp32": bm * bn * SOFTMAX_OPS},
                serial=True, mma_eta=prefill_eta(d, bits, fp8, p), mma_dtype="fp8" if fp8 else "fp16")
    io = b * q * (hq + 2 * hk) * d * elem   # Q, K, V read once (re-reads of K/V hit in L2)
    setup = (ctas * s.prefill_tile_ns + skipped * s.skip_ns) / workers
    work = KernelWork(trip, Epilogue(b * q * hq * d * FP16 / workers), iters, layout, 1, workers, res,
                      io, setup_ns=setup, name="sglang triton prefill")
    stores = store_parts(b * q, hk, d, bits, r, p, clone=elem, cast=bool(int(cfg.get("kv_cast", 0))))
    return [*stores, KernelPart(work, Occupancy(occ.ctas_per_sm, 1, False, occ.limiter))]


WORK = {SGLANG_TRITON_DECODE: sglang_triton_decode_work,
        SGLANG_TRITON_PREFILL: sglang_triton_prefill_work}
