"""Launch rows from shapes: one launch (`gemm_row`, `attention_row`, what `mpsim op` prices) and
the launch list of one forward pass of a decoder, as trace-row dicts (no kernels run). This module
is the one place trace rows are built from shapes.

Entry points for a caller that builds passes itself (synthesis; a serving simulator, once per
iteration): `pass_launches(spec, PassShape(...))`, every launch of one forward pass as costed
trace rows (grid and config as JSON text, analytic FLOPs and bytes), and
`decode_attention_costs(spec, first_pass, steps)`, the columns of a decode pass that change from
step to step (the attention rows: kv_len, grid, config, FLOPs, bytes), one value per step.

A forward pass launches in the engine's order: embed; per layer norm, QKV, RoPE, KV write,
attention, O, residual, norm, MLP up, activation, MLP down, residual (a parallel attention+MLP block
uses one norm and adds both branches); then the final norm, lm_head on the last position of each
sequence, and greedy sampling. Launch configs come from kernels.launch_config, the launchers' own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from mpsim import library
from mpsim.engines.rows import Target, as_engine, engine_rows
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.library import mpsim as own
from mpsim.library import mpsim_fp as own_fp
from mpsim.library.collectives import collective_row
from mpsim.library.mpsim_fp import FP8_CACHE
from mpsim.library.rows import Row, apply_config, check_sizes, costed, gemm_shape, single
from mpsim.models import ModelSpec
from mpsim.parallel import SINGLE, ParallelPlan, rank_spec, stage_of_layers, vocab_shard
from mpsim.policy import FLOAT_FORMATS, FP16_WEIGHTS, WeightChoice
from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import COLLECTIVE_OPS, FORMAT_BITS, KV_BITS, KV_FORMAT_OF_BITS, W_FORMATS

__all__ = ["ATTENTION_STEP_COLUMNS", "PassShape", "Row", "attention_row", "check_sizes", "costed",
           "decode_attention_costs", "framework_op_row", "gemm_row", "layer_rows", "pass_launches",
           "pass_rows", "weight_format"]
FORMAT_FAMILIES = ("fp16", "group", "anyprec")


@dataclass(frozen=True)
class PassShape:
    """One forward pass: `q_len` new tokens per sequence on top of a cache that ends at `kv_len`."""

    phase: str
    step: int
    batch: int
    q_len: int
    kv_len: int
    weights: WeightChoice
    kv_bits: int
    kv_block: int | None = None
    on_gpu: bool = True
    graph_capacity: int | None = None  # decode under CUDA graphs: attention sized for this capacity
    target: Target | None = None  # an engine's kernels (mpsim/engines); None: mpsim's own, as captured
    plan: ParallelPlan = SINGLE  # tensor/pipeline parallelism (mpsim/parallel.py): one rank's shapes
    kv_format: str | None = None  # the cache's format (traces/schema.py KV_FORMATS); None: by kv_bits
    rebuilt: bool = False  # the caller rebuilds every row as an engine's kernel (serving: serve/rows.py)

    @property
    def cache_format(self) -> str:
        return self.kv_format or KV_FORMAT_OF_BITS[self.kv_bits]

    @property
    def tokens(self) -> int:
        return self.batch * self.q_len


def pass_gemm_rows(p: PassShape, module: str, layer: int, m: int, n: int, k: int, w: WeightChoice,
                   bias: bool) -> list[Row]:
    """The launches of one GEMM of the pass: mpsim's own fp8 / fp4 kernels (mpsim/library/mpsim_fp.py:
    a W8A8 GEMM is its activation quantization, `{module}_act_quant`, then the GEMM), or one row."""
    if w.w_format in FLOAT_FORMATS and p.target is None and not p.rebuilt:
        rows = own_fp.gemm_rows(m, n, k, w.w_format, w.bits, w.group_size, bias, p.on_gpu)
        for r in rows:
            r.update(module=module if r["op"] == "gemm" else f"{module}_act_quant", layer=layer)
        return rows
    return [pass_gemm_row(p, module, layer, m, n, k, w, bias)]


def pass_gemm_row(p: PassShape, module: str, layer: int, m: int, n: int, k: int, w: WeightChoice,
                  bias: bool) -> Row:
    if w.w_format in FLOAT_FORMATS:  # an engine's fp8 / fp4 kernel builds the row from this shape
        if p.target is None and not p.rebuilt:
            raise MpsimInputError(f"{w.w_format} weights: mpsim's own kernels take these as more than "
                                  "one launch (pass_gemm_rows)")
        row = {**gemm_shape(m, n, k, w.w_format, w.bits, w.group_size, bias), "kernel": None,
               "grid": [], "config": {}}
        row.update(module=module, layer=layer)
        return row
    row = own.gemm(m, n, k, w.w_format, w.bits, w.group_size, bias, p.on_gpu)
    row.update(module=module, layer=layer)
    return row


def rowwise_row(p: PassShape, op: str, kernel: str, module: str, layer: int, m: int, n: int,
                k: int | None = None) -> Row:
    return own.rowwise(op, kernel, module, layer, m, n, k, p.on_gpu)


def pass_attention_row(spec: ModelSpec, p: PassShape, layer: int) -> Row:
    spec = rank_spec(spec, p.plan.tp)
    decode = p.phase == "decode"
    bits = p.kv_bits if decode else 16  # prefill attends over the fresh fp16 K/V of the prompt
    if decode and p.cache_format == FP8_CACHE and p.target is None and not p.rebuilt:
        row = own_fp.decode_attention(p.batch, p.kv_len, spec.num_heads, spec.num_kv_heads,
                                      spec.head_dim, p.kv_block, p.on_gpu, p.graph_capacity)
        row["layer"] = layer
        return row
    row = own.attention(p.batch, p.q_len, p.kv_len, spec.num_heads, spec.num_kv_heads, spec.head_dim,
                     bits, p.kv_block, p.on_gpu)
    if decode and p.graph_capacity is not None:  # CUDA-graph replay: the grid follows the capacity
        apply_config(row, lc.attention_decode_graph_config(
            p.batch, spec.num_heads, spec.num_kv_heads, spec.head_dim, p.graph_capacity, bits,
            p.kv_block, on_gpu=p.on_gpu))
    row["layer"] = layer
    if decode:
        row["kv_format"] = p.cache_format
    if p.target is None:
        return row
    if not decode and p.kv_len > p.q_len:  # an engine's chunk reads its cached prefix from the paged
        row["kv_block"] = p.kv_block        # cache (mpsim's own prefill kernel reads contiguous K/V)
    built = as_engine(row, p.target)
    assert built is not None, "attention is never fused away"
    return built


def kv_write_row(spec: ModelSpec, p: PassShape, layer: int) -> Row:
    spec = rank_spec(spec, p.plan.tp)
    if p.cache_format == FP8_CACHE and p.target is None and not p.rebuilt:
        return own_fp.kv_write(layer, p.batch, p.q_len, spec.num_kv_heads, spec.head_dim, p.kv_block)
    row = own.kv_write(layer, p.batch, p.q_len, spec.num_kv_heads, spec.head_dim, p.kv_bits,
                       p.kv_block, p.on_gpu)
    row["kv_format"] = p.cache_format
    return row


def _norm_kernel(spec: ModelSpec) -> str:
    return "rms_norm_kernel" if spec.norm == "rms" else "layer_norm_kernel"


def layer_rows(spec: ModelSpec, p: PassShape, layer: int) -> Iterator[Row]:
    """One decoder layer's launches on one rank (mpsim/parallel.py: its share of the heads and FFN)."""
    m, h, w = p.tokens, spec.hidden, p.weights
    shapes = rank_spec(spec, p.plan.tp).linear_shapes()
    mlp_up, mlp_down = ("gate_up", "down") if spec.mlp == "swiglu" else ("fc1", "fc2")
    yield rowwise_row(p, "norm", _norm_kernel(spec), "attn_norm", layer, m, h)
    yield from pass_gemm_rows(p, "qkv", layer, m, *shapes["qkv"][:2], w, shapes["qkv"][2])
    rank = rank_spec(spec, p.plan.tp)
    yield rowwise_row(p, "rope", "rope_kernel", "rope", layer, m, rank.q_dim + rank.kv_dim, spec.rot_dim)
    yield kv_write_row(spec, p, layer)
    yield pass_attention_row(spec, p, layer)
    yield from pass_gemm_rows(p, "o", layer, m, *shapes["o"][:2], w, shapes["o"][2])
    if not spec.parallel_attn_mlp:
        yield rowwise_row(p, "other", "residual_add_kernel", "attn_residual", layer, m, h)
        yield rowwise_row(p, "norm", _norm_kernel(spec), "mlp_norm", layer, m, h)
    yield from pass_gemm_rows(p, mlp_up, layer, m, *shapes[mlp_up][:2], w, shapes[mlp_up][2])
    if spec.mlp == "swiglu":
        yield rowwise_row(p, "act", "silu_mul_kernel", "act", layer, m, rank.ffn, 2 * rank.ffn)
    else:
        yield rowwise_row(p, "act", "gelu_kernel", "act", layer, m, rank.ffn, rank.ffn)
    yield from pass_gemm_rows(p, mlp_down, layer, m, *shapes[mlp_down][:2], w, shapes[mlp_down][2])
    if spec.parallel_attn_mlp:
        yield rowwise_row(p, "other", "residual_add_kernel", "attn_residual", layer, m, h)
    yield rowwise_row(p, "other", "residual_add_kernel", "mlp_residual", layer, m, h)


def pass_rows(spec: ModelSpec, p: PassShape) -> list[Row]:
    """Every launch of one forward pass, in order, with phase and step filled; under a parallel plan
    one rank's launches with the plan's collectives (mpsim/parallel.py), `tp` and `stage` set."""
    plan = p.plan
    stages = stage_of_layers(spec.num_layers, plan.pp)
    rows: list[Row] = [rowwise_row(p, "embed", "embedding_kernel", "embed", -1, p.tokens, spec.hidden)]
    rows.extend(_allreduce(p, spec.hidden, "embed_allreduce", -1, 0))
    for layer in range(spec.num_layers):
        for r in layer_rows(spec, p, layer):
            r["stage"] = stages[layer]
            rows.append(r)
            if r["module"] in ROW_PARALLEL:
                rows.extend(_allreduce(p, spec.hidden, f"{r['module']}_allreduce", layer, stages[layer]))
        if layer + 1 < spec.num_layers and stages[layer + 1] != stages[layer]:
            rows.append(collective_row("sendrecv", "nccl_sendrecv", p.tokens, spec.hidden, plan.tp,
                                       "stage_send", layer, stages[layer]))
    last, head_rows = plan.pp - 1, len(rows)
    if p.phase == "prefill":  # gather each sequence's last prompt position (the embedding kernel)
        rows.append(rowwise_row(p, "embed", "embedding_kernel", "last_token_gather", -1, p.batch,
                                spec.hidden))
    rows.append(rowwise_row(p, "norm", _norm_kernel(spec), "final_norm", -1, p.batch, spec.hidden))
    shard = vocab_shard(spec.vocab, plan.tp)
    rows.append(pass_gemm_row(p, "lm_head", -1, p.batch, shard, spec.hidden, FP16_WEIGHTS,
                              spec.lm_head_bias))
    if plan.tp > 1:  # the vocab shards' logits gathered on every rank
        rows.append(collective_row("allgather", plan.gather_kernel(), p.batch, shard * plan.tp,
                                   plan.tp, "logits_allgather", -1, last))
    rows.append(rowwise_row(p, "sample", "argmax_kernel", "sample", -1, p.batch, spec.vocab))
    for r in rows[head_rows:]:
        r["stage"] = last
    if p.target is not None:  # each op's row as the engine's library kernel builds it: none for a
        # fused op (RoPE, KV append), an activation quantization before a W8A8 / A4 GEMM
        target = p.target
        rows = [b for r in rows
                for b in ([r] if r["op"] in ("attention", *COLLECTIVE_OPS) else engine_rows(r, target))]
    for r in rows:
        r.update(phase=p.phase, step=p.step)
        r.setdefault("stage", 0)
        r.setdefault("tp", plan.tp)
        r.setdefault("micro_batch", 0)
    return rows


# The row-parallel GEMMs of a layer, each followed by an all-reduce under tensor parallelism.
ROW_PARALLEL = ("o", "down", "fc2")


def _allreduce(p: PassShape, hidden: int, module: str, layer: int, stage: int) -> list[Row]:
    """The all-reduce of the m x hidden output of a row-parallel GEMM (or the vocab-parallel
    embedding) on the tensor-parallel group; nothing on one GPU."""
    if p.plan.tp == 1:
        return []
    return [collective_row("allreduce", p.plan.allreduce_kernel(), p.tokens, hidden, p.plan.tp,
                           module, layer, stage)]


def pass_launches(spec: ModelSpec, p: PassShape) -> list[Row]:
    """Every launch of one forward pass, in launch order, as costed trace rows (launch_id and
    stream left to the caller)."""
    return [costed(r) for r in pass_rows(spec, p)]


# What changes between the decode passes of one weight format: the attention rows' KV length and
# what follows from it (the split count in grid and config, FLOPs and bytes).
ATTENTION_STEP_COLUMNS = ("kv_len", "kv_tokens", "grid", "config", "flops", "bytes_read", "bytes_written")


def decode_attention_costs(spec: ModelSpec, first: PassShape, steps: Iterable[int]) -> dict[str, list[Any]]:
    """ATTENTION_STEP_COLUMNS of the decode attention rows (the same for every layer) of the
    passes at `steps`, `first` being the pass at steps[0]: one list entry per step."""
    out: dict[str, list[Any]] = {c: [] for c in ATTENTION_STEP_COLUMNS}
    text: dict[tuple[Any, ...], tuple[str, str]] = {}  # one JSON encoding per distinct config
    for s in steps:
        at_step = replace(first, step=int(s), kv_len=first.kv_len - first.step + int(s))
        row = pass_attention_row(spec, at_step, 0)
        cost = launch_cost(row)
        key = (tuple(row["grid"]), tuple(sorted(row["config"].items())))
        if key not in text:
            text[key] = (json.dumps(row["grid"]), json.dumps(row["config"], sort_keys=True))
        values = (row["kv_len"], row["kv_tokens"], *text[key], cost.flops, cost.bytes_read,
                  cost.bytes_written)
        for col, value in zip(ATTENTION_STEP_COLUMNS, values, strict=True):
            out[col].append(value)
    return out


# ---- one launch from shapes, as `mpsim op` prices it: user input, checked ------------------------

def weight_format(family: str, bits: int) -> str:
    """The trace's w_format for a family ("fp16", "group", "anyprec") or a full spelling."""
    if family in W_FORMATS:
        return family
    if family == "group":
        return f"int{bits}-group"
    raise MpsimInputError(f"weight format {family!r}: expected one of {FORMAT_FAMILIES} or {W_FORMATS}")


def _check_weights(fmt: str, bits: int, group_size: int | None, k: int) -> None:
    """The stored bits one of the format's (group: 8, 4, 3, 2; any-precision: 2..8) and a group
    size the kernels take: a multiple of 32, or 0 / K for one group per row."""
    if fmt not in W_FORMATS or bits not in FORMAT_BITS[fmt]:
        family = "group" if fmt.endswith("-group") else fmt
        known = sorted({b for f, bs in FORMAT_BITS.items() if f == fmt or f.endswith(family) for b in bs})
        raise MpsimInputError(f"gemm: {family} weights at {bits} bits: expected bits in {known}")
    if (fmt.endswith("-group") and group_size not in (0, k) and (group_size or 0) % 32) \
            or (group_size is not None and group_size < 0):
        raise MpsimInputError(f"gemm: group size {group_size}: expected a multiple of 32, or 0 / k "
                              "(one group per row)")


def gemm_row(m: int, n: int, k: int, w_format: str = "fp16", bits: int = 16,
             group_size: int | None = None, bias: bool = False, *, on_gpu: bool = True,
             kernel: str | None = None, config: lc.LaunchConfig | None = None,
             sms: int = lc.GPU_SMS) -> Row:
    """y = x @ W.T for an M x K activation and an N x K weight stored in `w_format` at `bits`.

    `kernel`: None for mpsim's Triton kernels (the config gemm_config picks, or `config`, e.g. one
    of lc.gemm_candidates), or a kernel of another library (mpsim/library/): cublas.CUBLAS_GEMM
    (fp16/bf16 cuBLAS; config one of cublas_candidates, default cublas_heuristic) or trtllm.TRTLLM_WO_GEMV
    (TensorRT-LLM's per-channel int4/int8 weight-only GEMV, M <= 4)."""
    fmt = weight_format(w_format, bits)
    if fmt == "fp16":
        bits, group_size = 16, None
    elif fmt.endswith("-group"):
        bits = int(fmt[3:fmt.index("-")])
        group_size = 128 if group_size is None else group_size
    if min(m, n, k) < 1:
        raise MpsimInputError(f"gemm: m, n, k must be >= 1, got m={m}, n={n}, k={k}")
    check_sizes("gemm", m=m, n=n, k=k)
    _check_weights(fmt, bits, group_size, k)
    try:
        row = library.gemm_library(kernel)(kernel, m, n, k, fmt, bits, group_size, bias,
                                           on_gpu=on_gpu, config=config, sms=sms)
    except ValueError as exc:
        raise MpsimInputError(f"gemm: {exc}") from None
    row.update(phase="decode" if m <= lc.GEMV_MAX_ROWS else "prefill", module="gemm")
    return single(row)


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int = 16, kv_block: int | None = None, *, on_gpu: bool = True,
                  kernel: str | None = None, kv_append: bool = False, l2_warm: bool = False,
                  sms: int = lc.GPU_SMS, fp8_attention: bool = False, window: int = 0) -> Row:
    """Decode attention (q_len 1, over a cache of kv_bits) or causal prefill (q_len > 1, fp16).

    `kernel`: None for mpsim's Triton kernels, or "fa3" for vLLM's FlashAttention-3 (library.fa3's
    FA3_DECODE / FA3_PREFILL by q_len; 8-bit KV is FA3's fp8 e4m3 cache, 4-bit is not supported), with
    `kv_append` (the measured op also wrote the new tokens' K/V) and `l2_warm` (decode repeated back
    to back: a KV cache that fits the usable L2 stays there); `sms` sets FA3's split heuristic.
    "trtllm": TensorRT-LLM's attention op (XQA/MMHA decode by its dispatch rule, the context FMHA;
    8-bit KV is e4m3, in prefill too; `fp8_attention`: the FP8 context FMHA); "sglang": SGLang's FA3
    backend (library rooms mpsim/library/trtllm.py, sglang.py). `window`: a sliding window, the
    keys each query sees (0: all); one that covers every key (kv_len <= window) is no window (the
    kernels visit the same tiles: FA's flash_api drops it, and the published rows of every kernel
    but two show the same time, docs/validation.md#sliding-window-attention-stop-44); a binding one only
    for the rooms that model it (library.WINDOWED_LIBRARIES), one error otherwise."""
    if kv_bits not in KV_BITS:
        raise MpsimInputError(f"attention: kv bits must be one of {KV_BITS}, got {kv_bits}")
    if min(batch, q_len, kv_len, heads, kv_heads, head_dim) < 1 or kv_len < q_len:
        raise MpsimInputError("attention: sizes must be >= 1 and kv_len >= q_len")
    check_sizes("attention", batch=batch, q_len=q_len, kv_len=kv_len, heads=heads, kv_heads=kv_heads,
                head_dim=head_dim)
    if heads % kv_heads:
        raise MpsimInputError(f"attention: heads {heads} is not a multiple of kv_heads {kv_heads}")
    lib = library.attention_library(kernel)
    assert lib.attention is not None
    extra = library.window_kwargs(lib, kv_len, window)
    row = lib.attention(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, kv_block,
                        on_gpu=on_gpu, kv_append=kv_append, l2_warm=l2_warm, sms=sms,
                        fp8_attention=fp8_attention, **extra)
    row["phase"] = "decode" if q_len == 1 else "prefill"
    return single(row)


def framework_op_row(kernel: str, tokens: int, hidden: int, *, heads: int = 0, kv_heads: int = 0,
                     head_dim: int = 0, l2_warm: bool = False) -> Row:
    """One row-wise launch of another framework (Vidur's measured kernels): library.vllm's
    VLLM_RMS_NORM and library.torch's TORCH_ADD over `hidden` wide rows, VLLM_SILU_MUL with output
    width `hidden` (input 2 x hidden), VLLM_ROPE over the query and key heads. `l2_warm` (add only):
    the second input is the previous kernel's output, still in L2 when it fits."""
    build = library.rowwise_library(kernel)
    if min(tokens, hidden) < 1:
        raise MpsimInputError("row-wise op: tokens and hidden must be >= 1")
    check_sizes("row-wise op", tokens=tokens, hidden=hidden)
    row = build(kernel, tokens, hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    if l2_warm:
        row["config"] = {**row["config"], "l2_warm": 1}
    row["phase"] = "prefill"
    return single(row)
