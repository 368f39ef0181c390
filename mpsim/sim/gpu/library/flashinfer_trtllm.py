"""The trtllm-gen attention kernels FlashInfer ships (`flashinfer_trtllm_decode`, `_prefill`; vLLM on
Blackwell) as CTA work (names, configs, row builder and sources: mpsim/library/flashinfer_trtllm.py).

Closed cubins, modelled as FA3's design on the Blackwell rates (assumption). Decode: one CTA per
(split, KV head, sequence) over 128-key tiles, QK^T and PV at the fp8 rate on an fp8 cache (vLLM
quantizes Q to the cache's dtype for these kernels) over the tile's query rows (8, 16 or 128: the
host code's kernel choice, mpsim/library/flashinfer_trtllm.py), the softmax as FA3's on the fp32
lanes plus one exp a score on the 16-lane SFU (as the prefill model's), a split's partials merged
in the kernel (`tg_combine_us`). Prefill: 128 x 128 tiles up to the diagonal at `tg_prefill_eta`
of the tensor rate (an fp8 cache: fp8 Q, K, V at `tg_prefill_fp8_eta` of the fp8 rate), the
softmax (fp32 lanes, one exp a score on the 16-lane SFU) overlapped with the other tile's MMAs, so
on Blackwell's doubled tensor rate it bounds small head dims; a prologue per CTA wave. A chunk
after cached tokens (q_len < kv_len) is assumed to walk its keys as FA3's does (the queries last:
each query tile's keys end at its last row's token plus the cached ones), the cached K/V read once.

A KV cache (prefill: Q, K and V) that fits the usable L2 is read from it across the benchmark's
replays (`l2_warm`); a `kv_append` row also ran vLLM's KV append first (FA3's room), and every row
pays the rest of vLLM's op (`tg_*_scope_us`). TensorRT-LLM's FlashInfer backend runs the same
kernels (its trtllm-gen sub-backend, which Gemma 4 pins on Blackwell): its op appends K and V
(flashinfer's append_paged_kv_cache, priced as vLLM's append) and, over an fp8 cache, first casts
K, V and Q to e4m3 (`qkv_cast`: three elementwise kernels). Constants: the `tg_*` fields of FlashinferParams
(SimParams.flashinfer; mpsim/sim/gpu/library/flashinfer_attention.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.flashinfer_trtllm import TG_DECODE, TG_PREFILL
from mpsim.sim.gpu.library.fa3 import (
    decode_tiles,
    kv_append_part,
    prefill_kv_bytes,
    prefill_tiles,
    tile_spans,
)
from mpsim.sim.gpu.library.torch import elementwise_part
from mpsim.sim.gpu.memory import replayed_kv_bytes, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


def _shape(row: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(row[c]) for c in ("batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads",
                                       "head_dim"))


def tg_decode_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    f = p.flashinfer
    b, _, kv, hq, hk, d = _shape(row)
    fp8 = bool(int(cfg.get("fp8", 0)))
    elem = 1 if fp8 else FP16
    rows, bn, splits = int(cfg["block_m"]), int(cfg["block_n"]), int(cfg.get("split_k", 1))
    first, visited = decode_tiles(kv, cfg, bn)   # a sliding window's skipped and visited tiles
    tiles = cdiv(visited, splits)
    ctas = b * hk * splits
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * rows * bn * d,
                pipes={"fp32": rows * bn * f.tg_softmax_ops, "sfu": float(rows * bn)}, serial=True,
                mma_dtype="fp8" if fp8 else "fp16", bulk=True)  # TMA, as FA3's
    kv_bytes = b * hk * (kv - first * bn) * d * 2 * elem
    reads = b * hq * d * FP16 + kv_bytes - replayed_kv_bytes(bool(int(cfg.get("l2_warm", 0))), kv_bytes,
                                                             r, p)
    fixed = (f.tg_decode_scope_us + (f.tg_combine_us if splits > 1 else 0.0)) * 1e3
    res = CtaResources(4, bn * d * 2 * elem, rows * d * FP16, 2, 168)
    work = KernelWork(trip, Epilogue(b * hq * d * FP16 / ctas), (tiles,), "single", ctas, ctas, res,
                      reads, setup_ns=f.tg_cta_ns, fixed_ns=fixed, name="trtllm-gen decode")
    parts = [kv_append_part(b, hk, d, 8 if fp8 else 16, r, p)] if int(cfg.get("kv_append", 0)) else []
    return [*qkv_casts(cfg, b, hq, hk, d, r, p), *parts, KernelPart(work, Occupancy(1, 2, False, "kernel"))]


def qkv_casts(cfg: Mapping[str, int], tokens: int, hq: int, hk: int, d: int, r: GpuRates,
              p: SimParams) -> list[KernelPart]:
    """TensorRT-LLM's FlashInfer op over an fp8 cache (`qkv_cast`): the new K and V cast to e4m3
    before the append, and Q cast to the cache's dtype for the trtllm-gen cubins, three PyTorch
    elementwise kernels (torch.py `elementwise_part`); none otherwise."""
    if not int(cfg.get("qkv_cast", 0)):
        return []
    kv = float(tokens * hk * d)
    return [elementwise_part(kv, FP16, 1.0, r, p, "k cast"), elementwise_part(kv, FP16, 1.0, r, p, "v cast"),
            elementwise_part(float(tokens * hq * d), FP16, 1.0, r, p, "q cast")]


def tg_prefill_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                    p: SimParams, resident: float) -> LaunchWork:
    f = p.flashinfer
    b, q, kv, hq, hk, d = _shape(row)
    fp8 = bool(int(cfg.get("fp8", 0)))
    elem = 1 if fp8 else FP16
    bm, bn = int(cfg["block_m"]), int(cfg["block_n"])
    pack, window = bool(int(cfg.get("pack_gqa", 1))), int(cfg.get("window", 0))
    pairs, ctas = prefill_tiles(b, q, kv, hq, hk, bm, bn, pack, window)
    workers = min(ctas, r.sms)
    longest = max(tile_spans(q, hq // hk if pack else 1, bm, bn, kv, window))
    per_worker = max(math.ceil(pairs / r.sms), longest)
    # the softmax of a tile (fp32 lanes, one exp a score on the SFU) overlaps the other tile's
    # MMAs (two softmax warpgroups ping-pong), so the slower of the two bounds a trip
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * bm * bn * d, serial=False,
                pipes={"fp32": bm * bn * f.tg_softmax_ops, "sfu": float(bm * bn)},
                mma_dtype="fp8" if fp8 else "fp16",
                mma_eta=f.tg_prefill_fp8_eta if fp8 else f.tg_prefill_eta, bulk=True)
    io = b * q * d * hq * FP16 + prefill_kv_bytes(row, elem)
    if int(cfg.get("l2_warm", 0)) and io <= usable_l2(r, p):
        io = 0.0                            # replayed: Q, K, V still in L2
    res = CtaResources(12, 2 * bn * d * elem, bm * d * FP16, 2, 168)
    work = KernelWork(trip, Epilogue(FP16 * b * q * d * hq / workers), (per_worker,), "single",
                      workers, workers, res, io,
                      setup_ns=math.ceil(ctas / r.sms) * f.tg_prefill_tile_ns,
                      fixed_ns=f.tg_prefill_scope_us * 1e3, name="trtllm-gen prefill")
    parts = [kv_append_part(b * q, hk, d, 8 if fp8 else 16, r, p)] if int(cfg.get("kv_append", 0)) else []
    casts = qkv_casts(cfg, b * q, hq, hk, d, r, p)
    return [*casts, *parts, KernelPart(work, Occupancy(1, 2, False, "kernel"))]


WORK = {TG_DECODE: tg_decode_work, TG_PREFILL: tg_prefill_work}
