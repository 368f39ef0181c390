"""FlashInfer's attention in vLLM as CTA work (names, tile and split rules, row builder:
mpsim/library/flashinfer_attention.py, which cites the sources).

FlashInfer's FA2-template kernel (`flashinfer_decode`, `flashinfer_prefill`; Ampere/Ada): a CTA of
4 warps holds `cta_tile_q` packed rows (query heads of one KV head x tokens) and walks its KV
chunk in `cta_tile_kv`-key tiles. The KV tile follows FlashInfer's own sizing
(prefill.cuh, BatchPrefillWithPagedKVCacheDispatched): warps along Q = 1 for a 16-row tile
(4 warps split the keys) else 4; NUM_MMA_KV = min(8 / NUM_MMA_Q, what fits the shared memory left
after the Q tile at 2 CTAs an SM when two fit), a power of two; cta_tile_kv = NUM_MMA_KV x 16 x
warps along KV. Per tile: K and V loaded (fp8 e4m3: one byte an element, dequantized to 16 bits in
registers on the CUDA cores, `cvt_ops` lane-ops an element), QK^T and PV as mma.sync at
fa2.mma_eta of the fp16 rate (each warp along Q reads the whole tile from shared memory), the
online softmax on the fp32 lanes (fa2.softmax_ops a score: the same FA2 loop). KV chunks > 1 add
the merge kernel (`merge_us`). Prefill: a tile reaches the keys up to its last packed row's token,
plus the kv_len - q_len cached tokens before the queries when the row is a chunk after them
(prefill.cuh's causal mask puts the queries last: kv_len - qo_len + row // group_size), each
visited tile a full trip, the cached K/V read once (FA3's assumption). Under a sliding window a
query tile starts at its first row's window (kv_start_idx, `fi_spans`) and the plan sizes the KV
chunks on the window's pages (mpsim/library/flashinfer_attention.py).

The trtllm-gen kernels' work models (their constants `tg_*` sit here, in FlashinferParams):
mpsim/sim/gpu/library/flashinfer_trtllm.py.

A KV cache (prefill: Q, K and V) that fits the usable L2 is read from it across the benchmark's
replays (`l2_warm`). Every row also ran vLLM's KV append first when `kv_append` (FA3's room),
and pays the rest of vLLM's op (`*_scope_us`). Constants: FlashinferParams (SimParams.flashinfer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.flashinfer_attention import FI_DECODE, FI_PREFILL
from mpsim.sim.gpu.library.fa3 import causal_grid, kv_append_part, prefill_kv_bytes
from mpsim.sim.gpu.memory import replayed_kv_bytes
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class FlashinferParams:
    """FlashInfer in vLLM, its own kernels and the trtllm-gen ones (`tg_*`) (SimParams.flashinfer,
    `--fit-params flashinfer.NAME`); where each value
    came from: docs/validation.md "FlashAttention-2 and FlashInfer (vLLM off Hopper)"."""

    cvt_ops: float = 9.085               # lane-ops per fp8 K/V element: e4m3 -> f16, swizzle
    cta_ns: float = 2193.0               # per CTA: work-item lookup, Q load, O write
    decode_scope_us: float = 0.2109      # the rest of vLLM's decode op
    merge_us: float = 2.081              # KV chunks > 1: the merge kernel
    # share of the mma.sync peak the causal prefill loop reaches: refitted at stop 48 with one-wave
    # grids running each CTA's own tiles (0.6016 before), on the even half of an 800-row stratified
    # sample (seed 7) of the L40S vLLM 0.24.0 fiprefill rows (fp8 KV): even 23.2 -> 16.7%, odd (not
    # fitted) 24.9 -> 20.9%; FA2's refitted share is 0.812: the same FA2-template loop
    prefill_eta: float = 0.8213
    prefill_scope_us: float = 0.1559     # the rest of vLLM's prefill op
    tg_cta_ns: float = 666.8             # trtllm-gen decode: per CTA
    # fp32 lane-ops per score of the trtllm-gen softmax: FA3's softmax_ops when the tg_* constants
    # were fitted (7.462), kept when FA3's own was refitted (stop 38)
    tg_softmax_ops: float = 7.462
    tg_decode_scope_us: float = 1.437    # trtllm-gen: the rest of vLLM's decode op
    tg_combine_us: float = 2.081         # trtllm-gen decode: split partials merged
    tg_prefill_eta: float = 0.6506       # trtllm-gen prefill: share of the file's tensor rate
    tg_prefill_fp8_eta: float = 0.3386    # ... with an fp8 cache: share of the fp8 rate (fp8 Q, K, V)
    tg_prefill_tile_ns: float = 3084.0   # trtllm-gen prefill: per CTA wave, prologue/epilogue
    tg_prefill_scope_us: float = 1.177   # trtllm-gen: the rest of vLLM's prefill op


def _shape(row: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(row[c]) for c in ("batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads",
                                       "head_dim"))


def fi_kv_tile(tile_q: int, d: int, elem: int, r: GpuRates) -> tuple[int, int, int]:
    """(cta_tile_kv, CTAs an SM, warps along Q) by FlashInfer's shared-memory sizing."""
    warps_q = 1 if tile_q == 16 else 4
    warps_kv = 4 // warps_q
    mma_q = max(1, tile_q // (16 * warps_q))
    per_mma_kv = 2 * d * 16 * warps_kv * elem
    fixed = tile_q * d * FP16
    min_valid = warps_q // 2 if elem == 1 and warps_q > 2 else 1
    ctas = 2 if r.smem_bytes >= 2 * (fixed + min_valid * per_mma_kv) else 1
    budget = min(r.smem_bytes / ctas, r.smem_per_cta_bytes)
    fit = max(1, int((budget - fixed) // per_mma_kv))
    num_mma_kv = 1 << (min(fit, 8 // mma_q).bit_length() - 1)
    return num_mma_kv * 16 * warps_kv, ctas, warps_q


def fi_spans(q: int, kv: int, group: int, tile: int, window: int = 0) -> list[int]:
    """Keys each query tile of `tile` packed rows walks (prefill.cuh): up to its last row's token
    (causal, the queries last of kv), from kv_start_idx = kv + its first token - q - (window - 1)
    under a sliding window (0: from the first key); a decode's one tile: min(kv, window) keys."""
    out = []
    for j in range(cdiv(q * group, tile)):
        end = min(q, cdiv((j + 1) * tile, group)) + kv - q
        start = max(0, kv + (j * tile) // group - q - (window - 1)) if window else 0
        out.append(end - start)
    return out


def _fi_parts(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, decode: bool) -> LaunchWork:
    f = p.flashinfer
    b, q, kv, hq, hk, d = _shape(row)
    elem = 1 if int(cfg.get("kv_fp8", 0)) else FP16
    tile, chunks = int(cfg["block_m"]), int(cfg.get("split_k", 1))
    bn, ctas_sm, warps_q = fi_kv_tile(tile, d, elem, r)
    group = hq // hk
    ctas = int(grid[0]) * int(grid[1])
    spans = fi_spans(q, kv, group, tile, int(cfg.get("window", 0)))
    iters = tuple(cdiv(cdiv(max(n, 1), chunks), bn) for n in spans)
    lanes = tile * bn * p.fa2.softmax_ops + (bn * d * 2 * f.cvt_ops if elem == 1 else 0.0)
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * tile * bn * d, pipes={"fp32": lanes},
                serial=True, mma_eta=p.fa2.mma_eta, smem_bytes=warps_q * bn * d * 2 * elem)
    kv_bytes = b * hk * spans[0] * d * 2 * elem if decode else prefill_kv_bytes(row, elem)
    q_bytes = b * q * hq * d * FP16
    cached = kv_bytes if decode else kv_bytes + q_bytes   # what a replay finds in L2 when it fits
    reads = q_bytes + kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), cached, r, p)
    scope = f.decode_scope_us if decode else f.prefill_scope_us
    fixed = (scope + (f.merge_us if chunks > 1 else 0.0)) * 1e3
    res = CtaResources(4, bn * d * 2 * elem, tile * d * FP16, 1, 255)
    # the grid's x walks (request, query tile, KV chunk), chunk fastest: a CTA's class is its id
    # modulo tiles x chunks (fa3.causal_grid; a decode's one tile is one class)
    per_class = iters if decode else tuple(n for n in iters for _ in range(chunks))
    by_class, layout, workers = causal_grid(per_class, ctas, r.sms * ctas_sm)
    work = KernelWork(trip if decode else replace(trip, mma_eta=f.prefill_eta),
                      Epilogue(b * q * hq * d * FP16 / workers), by_class, layout, 1, workers, res,
                      reads, setup_ns=math.ceil(ctas / workers) * f.cta_ns, fixed_ns=fixed,
                      name="flashinfer decode" if decode else "flashinfer prefill")
    bits = 8 if elem == 1 else 16
    parts = [kv_append_part(b * q, hk, d, bits, r, p)] if int(cfg.get("kv_append", 0)) else []
    return [*parts, KernelPart(work, Occupancy(ctas_sm, 2, False, "smem"))]


def fi_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    return _fi_parts(row, cfg, grid, r, p, decode=True)


def fi_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                    p: SimParams, resident: float) -> LaunchWork:
    return _fi_parts(row, cfg, grid, r, p, decode=False)


WORK = {FI_DECODE: fi_decode_work, FI_PREFILL: fi_prefill_work}
