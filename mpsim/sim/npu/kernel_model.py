"""Launches as NPU work: per-core streams of SRAM-sized tiles.

GEMM/GEMV: the N x K weight is split by rows over the cores; each core streams its slice in tiles
(`npu_tile_bytes`, at most half its weight buffer: double buffering) through the decoder into the MAC
array. When the activation
block does not fit half the activation buffer, the cheaper loop order is taken: re-stream weights per
activation block, or re-stream activations per weight tile. Attention: (sequence, KV head) items are
dealt round-robin to the cores; each streams K/V tiles (at most half the activation buffer), runs QK^T and
PV on the MAC array and softmax (and KV dequant) on the vector unit. Row-wise ops and KV writes:
DMA in, vector unit, DMA out, split evenly over the cores. Bytes and FLOPs are the trace's analytic
ones (DMA moves exactly what the roofline counts, plus re-streams).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.params import SimParams
from mpsim.traces.accounting import (
    FP16,
    causal_pairs,
    decode_kv_tokens,
    kv_bytes_per_token_head,
    weight_bytes,
)


@dataclass(frozen=True)
class NpuTile:
    dma_bytes: float       # DRAM -> SRAM
    weights: float         # through the decoder
    bits: int              # stored width the decoder reads (16 = fp16)
    macs: float
    products: float        # matrix products (each pays the array's fill and drain)
    vec_flops: float
    serial: bool           # MAC then vector (attention), or decoder || MAC (streaming GEMM)


@dataclass(frozen=True)
class NpuWork:
    tile: NpuTile
    tiles_per_core: tuple[int, ...]
    write_bytes_per_core: tuple[float, ...]


def npu_work(row: Mapping[str, Any], r: NpuRates, p: SimParams) -> NpuWork:
    op = row["op"]
    if op == "gemm":
        return _gemm(row, r, p)
    if op == "attention":
        return _attention(row, r, p)
    return _streaming(row, r, p)


def _gemm(row: Mapping[str, Any], r: NpuRates, p: SimParams) -> NpuWork:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    fmt, bits = str(row["w_format"]), int(row["w_bits"])
    g = row.get("group_size")
    w = float(weight_bytes(n, k, fmt, bits, None if g is None else int(g)))
    a = float(m * k * FP16)
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    cores = r.cores
    fills = max(1, math.ceil(w / cores / (r.wbuf_bytes / 2)))  # weight-buffer halves per core
    m_blocks = max(1, math.ceil(a / (r.abuf_bytes / 2)))
    if m_blocks > 1 and w * m_blocks + a < w + a * fills:
        reads, passes, products = w * m_blocks + a, m_blocks, fills * m_blocks
    else:
        reads, passes, products = w + a * (fills if m_blocks > 1 else 1), 1, fills
    tiles = max(1, math.ceil(reads / cores / _tile_bytes(r.wbuf_bytes, p)))
    tile = NpuTile(
        dma_bytes=(reads + bias) / cores / tiles, weights=n * k * passes / cores / tiles,
        bits=16 if fmt == "fp16" else bits, macs=m * n * k / cores / tiles,
        products=products / tiles, vec_flops=m * n * p.npu_epilogue_ops / cores / tiles,
        serial=False)
    written = float(row["bytes_written"]) / cores
    return NpuWork(tile, (tiles,) * cores, (written,) * cores)


def _attention(row: Mapping[str, Any], r: NpuRates, p: SimParams) -> NpuWork:
    b, q, kv = int(row["batch"]), int(row["q_len"]), int(row["kv_len"])
    hq, hkv, d = int(row["num_q_heads"]), int(row["num_kv_heads"]), int(row["head_dim"])
    k_bits, v_bits = int(row["k_bits"]), int(row["v_bits"])
    items, rows = b * hkv, q * (hq // hkv)
    token = kv_bytes_per_token_head(d, k_bits) + kv_bytes_per_token_head(d, v_bits)
    tile_tokens = max(1, min(kv, int(_tile_bytes(r.abuf_bytes, p) // token)))
    per_item = max(1, math.ceil(kv / tile_tokens))
    core_tiles = _item_tiles(row, per_item, tile_tokens, r.cores)
    frac = causal_pairs(q, kv) / (q * kv) if bool(row["causal"]) and kv > 0 else 1.0
    quantized = (k_bits < 16) + (v_bits < 16)
    tile = NpuTile(
        dma_bytes=float(row["bytes_read"]) / sum(core_tiles), weights=0.0, bits=16,
        macs=2.0 * rows * tile_tokens * d * frac, products=2.0,
        vec_flops=(rows * tile_tokens * frac * p.softmax_ops_per_score
                   + quantized * tile_tokens * d * p.kv_dequant_ops + rows * d),
        serial=True)
    per_core = _deal(items, r.cores)
    written = float(row["bytes_written"])
    return NpuWork(tile, core_tiles, tuple(written * i / items for i in per_core))


def _item_tiles(row: Mapping[str, Any], per_item: int, tile_tokens: int, cores: int) -> tuple[int, ...]:
    """Tiles per core, (sequence, KV head) items dealt round-robin. Decode over sequences of different
    lengths (kv_tokens < batch x kv_len): the longest sequence's items (dealt first) walk kv_len, the
    others the mean of the rest, so the batch's KV tokens are kept."""
    b, hkv, kv = int(row["batch"]), int(row["num_kv_heads"]), int(row["kv_len"])
    tokens = decode_kv_tokens(row)
    per_core = _deal(b * hkv, cores)
    if tokens is None or b == 1 or tokens >= b * kv:
        return tuple(i * per_item for i in per_core)
    rest = max(1, math.ceil(math.ceil((tokens - kv) / (b - 1)) / tile_tokens))
    longest = _deal(hkv, cores)  # items 0..hkv-1 land on cores 0, 1, ... first
    return tuple(n * per_item + (i - n) * rest for i, n in zip(per_core, longest, strict=True))


def _streaming(row: Mapping[str, Any], r: NpuRates, p: SimParams) -> NpuWork:
    cores = r.cores
    read = float(row["bytes_read"]) / cores
    tiles = max(1, math.ceil(read / _tile_bytes(r.abuf_bytes, p)))
    tile = NpuTile(read / tiles, 0.0, 16, 0.0, 0.0, float(row["flops"]) / cores / tiles, True)
    return NpuWork(tile, (tiles,) * cores, (float(row["bytes_written"]) / cores,) * cores)


def _tile_bytes(buffer_bytes: float, p: SimParams) -> float:
    """A DMA tile: a sub-buffer of one half of a double-buffered SRAM buffer."""
    return min(buffer_bytes / 2, float(p.npu_tile_bytes))


def _deal(items: int, cores: int) -> tuple[int, ...]:
    """Items per core when dealt round-robin."""
    return tuple(items // cores + (1 if c < items % cores else 0) for c in range(cores))
