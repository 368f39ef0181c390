"""One rank's share of a model under tensor parallelism, split as vLLM splits a checkpoint.

The split is mpsim/parallel.py's (docs/parallelism.md): QKV and gate/up column-parallel (rank r
keeps its query heads, its KV heads or its replica of one, its slice of the FFN rows of gate and of
up), O and down row-parallel (rank r keeps a 1/tp slice of the input columns; the bias, if any, on
rank 0 only, zeros elsewhere, as vLLM's RowParallelLinear adds it on rank 0), the embedding and the
lm_head vocab-parallel (the vocab padded to a multiple of tp; each rank's embedding shard gets one
extra zero row that the ids of other shards are mapped to: the masked lookup of vLLM's
VocabParallelEmbedding). Norms are replicated.

Quantized linears are quantized at the full shape first and then split (what loading a quantized
checkpoint on tp ranks does), so every rank multiplies exactly the values a single GPU would: only
the order of the sums across ranks differs. A row-parallel split must fall on whole quantization
groups and whole 32-column words; anything else is one clear error.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mpsim.engine.backends import Backend
from mpsim.engine.float_weights import FloatWeight
from mpsim.engine.model import Decoder
from mpsim.engine.quantize import QuantizedLayer, Stored, linear_set, stored_linear
from mpsim.engine.weights import Linear, ModelParams
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.parallel import rank_spec, vocab_shard
from mpsim.policy import Policy
from mpsim.reference.anyprec import AnyPrecWeight as RefAnyPrec
from mpsim.reference.group_quant import GroupQuantWeight
from mpsim.reference.packing import pack_codes, unpack_codes

COLUMN_PARALLEL = ("qkv", "gate_up", "fc1")
ROW_PARALLEL = ("o", "down", "fc2")


def kv_heads_of_rank(spec: ModelSpec, tp: int, rank: int) -> range:
    """The KV heads rank `rank` holds: its 1/tp share, or (kv_heads < tp) the one head it
    replicates, rank // (tp / kv_heads) as vLLM's QKVParallelLinear picks it."""
    kv = spec.num_kv_heads
    if kv >= tp:
        per = kv // tp
        return range(rank * per, (rank + 1) * per)
    head = rank // (tp // kv)
    return range(head, head + 1)


def column_rows(name: str, spec: ModelSpec, tp: int, rank: int) -> np.ndarray:
    """The output rows of a column-parallel linear that rank `rank` keeps, in the order it stores them."""
    d = spec.head_dim
    if name == "qkv":
        hq = spec.num_heads // tp
        heads = kv_heads_of_rank(spec, tp, rank)
        kv = np.arange(heads.start * d, heads.stop * d)
        return np.concatenate([np.arange(rank * hq * d, (rank + 1) * hq * d),
                               spec.q_dim + kv, spec.q_dim + spec.kv_dim + kv])
    f = spec.ffn // tp
    own = np.arange(rank * f, (rank + 1) * f)
    return np.concatenate([own, spec.ffn + own]) if name == "gate_up" else own


def _rows(w: Stored, idx: np.ndarray) -> Stored:
    if isinstance(w, np.ndarray):
        return np.ascontiguousarray(w[idx])
    if isinstance(w, GroupQuantWeight):
        return dataclasses.replace(w, qweight=np.ascontiguousarray(w.qweight[idx]),
                                   scales=np.ascontiguousarray(w.scales[idx]),
                                   zeros=np.ascontiguousarray(w.zeros[idx]), n=len(idx))
    if isinstance(w, RefAnyPrec):
        return dataclasses.replace(w, qweight=np.ascontiguousarray(w.qweight[:, idx]),
                                   luts={b: np.ascontiguousarray(t[idx]) for b, t in w.luts.items()},
                                   n=len(idx))
    return dataclasses.replace(w, w_hat=np.ascontiguousarray(w.w_hat[idx]))


def _cols(w: Stored, lo: int, hi: int, where: str) -> Stored:
    """Input columns lo..hi of a stored weight (a row-parallel shard)."""
    if isinstance(w, np.ndarray):
        return np.ascontiguousarray(w[:, lo:hi])
    if isinstance(w, FloatWeight):
        return dataclasses.replace(w, w_hat=np.ascontiguousarray(w.w_hat[:, lo:hi]))
    k = w.k
    unit = w.group_size if isinstance(w, GroupQuantWeight) else 32
    if k % 32 or (hi - lo) % 32 or (hi - lo) % unit or unit >= k:
        kind = (f"{w.bits}-bit groups of {w.group_size}" if isinstance(w, GroupQuantWeight)
                else "any-precision bit-planes (32-column words)")
        raise MpsimInputError(f"{where}: K = {k} split into row-parallel shards of {hi - lo} columns "
                              f"cuts the {kind}; expected shards of whole groups and whole 32-column "
                              f"words (a smaller --policy group size, e.g. w4g32, or a smaller --tp)")
    if isinstance(w, GroupQuantWeight):
        codes = unpack_codes(w.qweight, w.bits, k)[:, lo:hi]
        g0, g1 = lo // w.group_size, hi // w.group_size
        return dataclasses.replace(w, qweight=pack_codes(np.ascontiguousarray(codes), w.bits),
                                   scales=np.ascontiguousarray(w.scales[:, g0:g1]),
                                   zeros=np.ascontiguousarray(w.zeros[:, g0:g1]), k=hi - lo)
    return dataclasses.replace(w, qweight=np.ascontiguousarray(w.qweight[:, :, lo // 32:hi // 32]),
                               k=hi - lo)


def shard_linear(name: str, w: Stored, bias: np.ndarray | None, spec: ModelSpec, tp: int,
                 rank: int, layer: int) -> tuple[Stored, np.ndarray | None]:
    """Rank `rank`'s share of one decoder-block linear (stored form) and of its bias."""
    if name in COLUMN_PARALLEL:
        idx = column_rows(name, spec, tp, rank)
        return _rows(w, idx), None if bias is None else np.ascontiguousarray(bias[idx])
    if name not in ROW_PARALLEL:
        raise ValueError(f"linear {name!r}: expected one of {COLUMN_PARALLEL + ROW_PARALLEL}")
    k = spec.q_dim if name == "o" else spec.ffn
    per = k // tp
    part = _cols(w, rank * per, (rank + 1) * per, f"layer {layer} {name}")
    return part, None if bias is None else (bias if rank == 0 else np.zeros_like(bias))


def _vocab_rows(table: np.ndarray, tp: int, rank: int) -> np.ndarray:
    """Rows rank*shard .. (rank+1)*shard of the table padded with zero rows to shard * tp."""
    shard = vocab_shard(table.shape[0], tp)
    padded = np.zeros((shard * tp, *table.shape[1:]), dtype=table.dtype)
    padded[: table.shape[0]] = table
    return np.ascontiguousarray(padded[rank * shard:(rank + 1) * shard])


def rank_decoder(params: ModelParams, policy: Policy, backend: Backend, tp: int, rank: int, *,
                 dummy_seed: int | None = None) -> Decoder:
    """The Decoder of rank `rank` of `tp`: its shard of every weight, at the rank's shapes
    (mpsim.parallel.rank_spec). With `dummy_seed`, random quantized codes drawn at the full shapes
    in the single-GPU order (so every rank splits the same model a single GPU would run)."""
    spec = params.spec
    rng = None if dummy_seed is None else np.random.default_rng(dummy_seed)
    quantized = []
    for i, layer in enumerate(params.layers):
        sets = {}
        for name, lin in layer.linears.items():  # quantize_layer's order: the same random draws
            part, bias = shard_linear(name, stored_linear(lin, policy, rng=rng), lin.bias, spec, tp, rank, i)
            sets[name] = linear_set(part, bias, backend.device)
        quantized.append(QuantizedLayer(sets))
    shard = _vocab_rows(params.embed, tp, rank)
    embed = np.concatenate([shard, np.zeros((1, spec.hidden), dtype=shard.dtype)])  # the masked row
    head = params.lm_head
    head_bias = None if head.bias is None else _vocab_rows(head.bias, tp, rank)
    local = ModelParams(rank_spec(spec, tp), embed, params.layers, params.final_norm,
                        Linear(_vocab_rows(head.weight, tp, rank), head_bias))
    return Decoder(local, policy, backend, quantized=quantized)
