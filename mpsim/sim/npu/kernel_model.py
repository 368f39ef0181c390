"""One launch as NPU work: what streams from DRAM, what each unit of the busiest core does.

The step model (step.py) runs these in order. Bytes split three ways:
- `prefetch_bytes`: operands that do not depend on the step's earlier operators (weights, their
  scales and LUTs, biases; in decode the KV cache of earlier tokens), which the DMA engines fetch
  ahead of the compute as far as SRAM allows;
- `dep_bytes`: activations, read once the producer is done, less what the previous operator left
  in the activation SRAM (`resident`);
- `write_bytes`: posted writes after the compute.
Cycles are per core, for the busiest core: GEMMs split N over the cores in whole array columns,
attention deals (sequence, KV head) items round-robin. `stream_cycles` is the body that overlaps
with the operator's own stream (decoder, matrix unit, SRAM ports and vector unit run as a
pipeline, so the slowest sets the pace); `tail_cycles` follow the last tile (array fill and drain).
Matrix products take the faster of the weight-stationary array and the GEMV path (rates.py).
Bytes and FLOPs are the trace's analytic ones (what the roofline counts, plus weight re-streams).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.params import SimParams
from mpsim.traces.accounting import FP16, causal_pairs, decode_kv_tokens, weight_bytes

UNITS = ("decoder", "mac", "vector", "sram")
FUSABLE = ("norm", "rope", "act", "other")  # folded into a neighbouring GEMM/attention (fusion.py)
HOSTS = ("gemm", "attention")


@dataclass(frozen=True)
class OpWork:
    op: str
    prefetch_bytes: float
    dep_bytes: float
    write_bytes: float
    stream_cycles: float
    tail_cycles: float
    unit_cycles: dict[str, float] = field(default_factory=dict)  # busy cycles per unit, busiest core
    macs: float = 0.0             # chip total, as executed
    decoded: float = 0.0          # weights through the decoder, chip total
    bits: int = 16                # stored width the decoder reads
    vector_ops: float = 0.0       # chip total
    sram_bytes: float = 0.0       # chip total, written into and read out of SRAM

    def as_fused(self) -> OpWork:
        """This operator folded into a neighbour: its vector work runs inside the host's stream and
        its inputs are already on chip (no dispatch, no DRAM reads; its writes remain)."""
        return OpWork(self.op, 0.0, 0.0, self.write_bytes, self.stream_cycles, 0.0,
                      dict(self.unit_cycles), self.macs, self.decoded, self.bits, self.vector_ops,
                      self.sram_bytes)


def op_work(row: Mapping[str, Any], r: NpuRates, p: SimParams, resident: float = 0.0) -> OpWork:
    op = str(row["op"])
    if op == "gemm":
        return _gemm(row, r, p, resident)
    if op == "attention":
        return _attention(row, r, p, resident)
    return _streaming(row, r, resident)


def _pipeline(op: str, units: dict[str, float], **kw: Any) -> OpWork:
    stream = max(units.values()) if units else 0.0
    return OpWork(op=op, stream_cycles=stream, unit_cycles=units, **kw)


def _gemm(row: Mapping[str, Any], r: NpuRates, p: SimParams, resident: float) -> OpWork:
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    fmt, bits = str(row["w_format"]), int(row["w_bits"])
    g = row.get("group_size")
    w = float(weight_bytes(n, k, fmt, bits, None if g is None else int(g)))
    bias = n * FP16 if bool(row.get("bias") or False) else 0
    act = float(m * k * FP16)
    act_cap = r.cores * r.abuf_bytes / 2  # double-buffered activation SRAM, whole chip
    # Activations that do not fit: the cheaper loop order (docs/npu.md): re-stream the weights per
    # activation block, or keep each weight-buffer fill and re-stream the activations past it.
    blocks = max(1, math.ceil(act / act_cap))
    fills = max(1, math.ceil(w / r.cores / (r.wbuf_bytes / 2)))
    restream_weights = blocks > 1 and w * blocks <= w + act * fills
    passes = blocks if restream_weights else 1
    act_restream = act * (fills - 1) if blocks > 1 and not restream_weights else 0.0
    n_core = math.ceil(math.ceil(n / r.cols) / r.cores) * r.cols  # whole array columns per core
    m_block = math.ceil(m / passes)
    cyc, on_array = r.matrix_cycles(m_block, n_core, k)
    if not on_array:  # the GEMV path needs no padding to whole columns
        cyc = r.gemv_cycles(m_block, n / r.cores, k)
    mac = cyc * passes
    weights = n * k * passes / r.cores
    stored = 16 if fmt == "fp16" else bits
    decoder = weights / r.decode_rate(stored, fmt)
    prefetch = w * passes + bias + act_restream
    a_reads = m * k * FP16 * (math.ceil(n_core / r.cols) if on_array else 1)
    out = m * n_core * FP16
    sram_w = 2 * prefetch / r.cores  # DMA writes it, the decoder reads it
    units = {"decoder": decoder, "mac": mac,
             "vector": m * n / r.cores * p.npu_epilogue_ops / r.vec_pc,
             "sram": max(sram_w / r.wbuf_Bpc, (a_reads + out) / r.abuf_Bpc)}
    return _pipeline(
        "gemm", units, prefetch_bytes=prefetch, dep_bytes=max(0.0, act - resident),
        write_bytes=float(row["bytes_written"]), tail_cycles=float(r.rows + r.cols),
        macs=float(m * n * k), decoded=float(n * k * passes), bits=stored,
        vector_ops=m * n * p.npu_epilogue_ops, sram_bytes=2 * prefetch + (a_reads + out) * r.cores)


def _attention(row: Mapping[str, Any], r: NpuRates, p: SimParams, resident: float) -> OpWork:
    b, q, kv = int(row["batch"]), int(row["q_len"]), int(row["kv_len"])
    hq, hkv, d = int(row["num_q_heads"]), int(row["num_kv_heads"]), int(row["head_dim"])
    k_bits, v_bits = int(row["k_bits"]), int(row["v_bits"])
    causal = bool(row["causal"])
    items, rows = b * hkv, q * (hq // hkv)
    per_core = math.ceil(items / r.cores)
    frac = causal_pairs(q, kv) / (q * kv) if causal and kv > 0 else 1.0
    read = float(row["bytes_read"])
    q_bytes = float(b * q * hq * d * FP16)
    # The cache of earlier tokens is there before the step (prefetchable); the K/V of this call's
    # q tokens were written by this step (all of them in a prefill).
    kv_bytes = max(0.0, read - q_bytes) * max(0, kv - q) / kv if kv > 0 else 0.0
    act = read - kv_bytes
    quantized = (k_bits < 16) + (v_bits < 16)

    def item_mac(n: int) -> float:  # QK^T and PV of one (sequence, KV head) item over n keys
        return r.matrix_cycles(rows, n, d)[0] + r.matrix_cycles(rows, d, n)[0]

    def item_vec(n: int) -> float:
        return (rows * n * frac * p.mpsim.softmax_ops_per_score
                + quantized * n * d * p.mpsim.kv_dequant_ops + rows * d)

    # Decode over sequences of different lengths (kv_tokens < batch x kv_len): the longest
    # sequence's items (dealt first, one per core) walk kv_len, the others the mean of the rest.
    rest = _rest_kv(row, b, kv)
    longest = min(per_core, math.ceil(hkv / r.cores))
    mac = (longest * item_mac(kv) + (per_core - longest) * item_mac(rest)) * frac
    vec = longest * item_vec(kv) + (per_core - longest) * item_vec(rest)
    item_bytes = read / items
    units = {"mac": mac, "vector": vec / r.vec_pc, "sram": per_core * 2 * item_bytes / r.wbuf_Bpc}
    keys = kv + (b - 1) * rest  # per KV head, over the batch
    return _pipeline(
        "attention", units, prefetch_bytes=kv_bytes, dep_bytes=max(0.0, act - resident),
        write_bytes=float(row["bytes_written"]), tail_cycles=float(r.rows + r.cols),
        macs=2.0 * hq * q * keys * d * frac,
        vector_ops=hkv * (item_vec(kv) + (b - 1) * item_vec(rest)), sram_bytes=2 * read)


def _rest_kv(row: Mapping[str, Any], b: int, kv: int) -> int:
    """Mean keys of the sequences other than the longest (kv_len for a uniform batch)."""
    tokens = decode_kv_tokens(row)
    if tokens is None or b == 1 or tokens >= b * kv:
        return kv
    return max(1, math.ceil((tokens - kv) / (b - 1)))


def _streaming(row: Mapping[str, Any], r: NpuRates, resident: float) -> OpWork:
    read, written = float(row["bytes_read"]), float(row["bytes_written"])
    flops = float(row["flops"])
    units = {"vector": flops / r.cores / r.vec_pc, "sram": (read + written) / r.cores / r.abuf_Bpc}
    return _pipeline(str(row["op"]), units, prefetch_bytes=0.0,
                     dep_bytes=max(0.0, read - resident), write_bytes=written, tail_cycles=0.0,
                     vector_ops=flops, sram_bytes=read + written)
