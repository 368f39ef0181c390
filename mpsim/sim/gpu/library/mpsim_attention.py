"""Attention launches (kernels/attention_*.py) as CTA work.

Decode (flash-decoding): grid (sequence, KV head, KV split); a CTA streams its split of the cache in
BLOCK_N-token tiles (K and V codes plus per-token scale/zero, scale and zero folded out of the
per-element work; the splits are sized by the longest sequence, kv_len, the trips by the mean one,
kv_tokens / batch), scores on CUDA cores for one query head (MHA) or on tensor cores for a GQA group
padded to 16 rows, online softmax on CUDA cores (a trip's CUDA-core work by pipe: the loop's sm_90a
SASS per cached element, mpsim/sim/gpu/sass_table.py), then the splits exchange (acc, m, l) in L2
and the last one merges.
Prefill (causal flash attention): grid (query tile, sequence x head); the CTA of query tile i walks
the key tiles up to its last row, so its trips grow with i. QK^T, softmax, PV run one after another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import DECODE_ATTENTION_KERNEL
from mpsim.kernels.launch_config_fp import DECODE_FP8_KERNEL
from mpsim.sim.gpu.memory import prefill_kv_extra_reads, residency_credit, usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.sass import per_weight_mix
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip
from mpsim.traces.accounting import FP16, PAGED_BLOCK_ENTRY, decode_kv_tokens, kv_bytes_per_token_head

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FP32 = 4
MMA_MIN_ROWS = 16


def attention_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    if row["kernel"] in (DECODE_ATTENTION_KERNEL, DECODE_FP8_KERNEL):
        return _decode(row, cfg, grid, r, p, resident)
    return _prefill(row, cfg, grid, r, p, resident)


def _shape(row: Mapping[str, Any]) -> tuple[int, int, int, int, int, int]:
    return (int(row["batch"]), int(row["q_len"]), int(row["kv_len"]), int(row["num_q_heads"]),
            int(row["num_kv_heads"]), int(row["head_dim"]))


def _decode(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
            p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    b, q, kv, hq, hkv, d = _shape(row)
    bg, bn, bd, splits = cfg["block_m"], cfg["block_n"], cfg["block_k"], cfg.get("split_k", 1)
    k_bits, v_bits = int(row["k_bits"]), int(row["v_bits"])
    group = hq // hkv
    tiles = -(-max(kv, 1) // bn)  # the longest sequence's tiles set the split length
    per = -(-tiles // splits)
    iters, inner = decode_trips(b, kv, decode_kv_tokens(row) or b * kv, hkv, bn, splits)
    fp8 = row["kernel"] == DECODE_FP8_KERNEL  # the e4m3 cache: values alone (per-head scales)
    fmt = "fp8-e4m3" if fp8 else None
    token_bytes = kv_bytes_per_token_head(d, k_bits, fmt) + kv_bytes_per_token_head(d, v_bits, fmt)
    block = row.get("kv_block")
    table = bn / int(block) * PAGED_BLOCK_ENTRY if block else 0.0
    q_share = group * q * d * FP16 / per
    # one query head: vector dots on CUDA cores; a GQA group: QK^T and PV on the tensor cores
    mma = 0.0 if bg == 1 else 2.0 * 2.0 * max(bg, MMA_MIN_ROWS) * bn * bd
    trip = Trip(bn * token_bytes + table + q_share, mma,
                pipes=decode_trip_pipes(k_bits, v_bits, cfg, r.sass_arch, fp8), serial=True,
                overhead_cycles=p.mpsim.iter_overhead_cycles)
    total = b * hkv * splits
    partial = (bg * bd + 2 * bg) * FP32
    epi = Epilogue(float(row["bytes_written"]) / total,
                   ws_bytes=2.0 * partial if splits > 1 else 0.0,
                   reduce_ops=3.0 * bg * bd if splits > 1 else 0.0, sync=splits > 1)
    res = CtaResources(cfg["num_warps"], bn * token_bytes, bg * bd * FP16, cfg["num_stages"],
                       registers_per_thread(bg * bd, 2 * bn * bd, cfg["num_warps"] * 32,
                                            r.max_regs_per_thread))
    occ = occupancy(res, r)
    q_bytes = b * q * hq * d * FP16
    reads = float(row["bytes_read"]) - residency_credit(resident, q_bytes)
    return KernelWork(trip, epi, iters, "outer", inner, total, res, reads), occ


def decode_trip_pipes(k_bits: int, v_bits: int, cfg: Mapping[str, int],
                      arch: str = "sm_90a", fp8: bool = False) -> dict[str, float]:
    """Lanes by pipe (and issue slots) of one BLOCK_N-token trip: the kernel's SASS mix (on `arch`,
    the device's GpuRates.sass_arch) per
    cached element (scripts/sass_mix.py, rows per K = V width) times the trip's 2 x BLOCK_N x
    BLOCK_D K and V elements. K and V of different widths: the mean of the two widths' mixes (an
    assumption: each row's loop spends half its elements on K, half on V). `fp8`: the e4m3-cache
    kernel's rows (sass_table_fp.py, kv-fp8)."""
    bg, bn, bd, warps = (int(cfg[k]) for k in ("block_m", "block_n", "block_k", "num_warps"))
    if fp8:
        mix = per_weight_mix(DECODE_FP8_KERNEL, 8, bg, bn, bd, warps, arch, w_format="kv-fp8")
        return {key: 2.0 * bn * bd * v for key, v in mix.items()}
    mixes = [per_weight_mix(DECODE_ATTENTION_KERNEL, bits, bg, bn, bd, warps, arch)
             for bits in {k_bits, v_bits}]
    elements = 2.0 * bn * bd
    return {key: elements * sum(m[key] for m in mixes) / len(mixes) for key in mixes[0]}


def decode_trips(b: int, kv: int, kv_tokens: int, hkv: int, bn: int,
                 splits: int) -> tuple[tuple[int, ...], int]:
    """(trips per CTA class, CTAs per class) of a decode launch; classes in linear-id order.

    A uniform batch (kv_tokens = b x kv): one class per split, every sequence walking kv. Sequences
    of different lengths (kv_tokens < b x kv): the longest sequence (kv) and the others at their
    mean, (kv_tokens - kv) / (b - 1), one class per (split, sequence) of hkv CTAs, so the total
    tokens are kept and the longest sequence's splits still make the tail.
    """
    tiles = -(-max(kv, 1) // bn)
    per = -(-tiles // splits)

    def split_trips(length: int) -> list[int]:
        mine = -(-max(length, 1) // bn)
        return [max(0, min(per, mine - j * per)) for j in range(splits)]

    if b == 1 or kv_tokens >= b * kv:
        return tuple(split_trips(kv)), b * hkv
    rest = split_trips(-(-(kv_tokens - kv) // (b - 1)))
    longest = split_trips(kv)
    return tuple(t for j in range(splits) for t in (longest[j], *([rest[j]] * (b - 1)))), hkv


def _prefill(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
             p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    b, q, kv, hq, hkv, d = _shape(row)
    bm, bn, bd = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    q_tiles = -(-q // bm)
    causal = bool(row["causal"])
    iters = tuple(-(-min(kv, kv - q + (i + 1) * bm) // bn) if causal else -(-kv // bn)
                  for i in range(q_tiles))
    mean_iters = max(1.0, sum(iters) / q_tiles)
    trip = Trip(bn * d * FP16 * 2 + bm * d * FP16 / mean_iters, 2.0 * 2.0 * bm * bn * bd,
                pipes={"fp32": bm * bn * p.mpsim.softmax_ops_per_score + bm * bd}, serial=True,
                overhead_cycles=p.mpsim.iter_overhead_cycles)
    total = q_tiles * b * hq
    epi = Epilogue(float(row["bytes_written"]) / total)
    res = CtaResources(cfg["num_warps"], 2.0 * bn * bd * FP16, bm * bd * FP16, cfg["num_stages"],
                       registers_per_thread(bm * bd + bm * bn, 0, cfg["num_warps"] * 32,
                                            r.max_regs_per_thread))
    occ = occupancy(res, r)
    q_bytes = b * q * hq * d * FP16
    kv_bytes = float(row["bytes_read"]) - q_bytes
    tile_kv = b * hq * sum(iters) * bn * d * FP16 * 2
    heads_per_wave = max(1.0, r.sms * occ.ctas_per_sm / q_tiles / (hq // hkv))
    extra = prefill_kv_extra_reads(tile_kv, kv_bytes, kv * d * FP16 * 2, heads_per_wave,
                                   usable_l2(r, p))
    reads = float(row["bytes_read"]) + extra - residency_credit(resident, q_bytes)
    return KernelWork(trip, epi, iters, "inner", 1, total, res, reads), occ
