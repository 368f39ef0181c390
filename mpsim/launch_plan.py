"""The launch list of one forward pass of a decoder, as trace-row dicts (no kernels run).

This is the order the engine launches its kernels in: embed; per layer norm, QKV, RoPE, KV write,
attention, O, residual, norm, MLP up, activation, MLP down, residual (a parallel attention+MLP block
uses one norm and adds both branches); then the final norm, lm_head on the last position of each
sequence, and greedy sampling. Launch configs come from kernels.launch_config, the launchers' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mpsim.kernels import launch_config as lc
from mpsim.models import ModelSpec
from mpsim.policy import FP16_WEIGHTS, WeightChoice

Row = dict[str, Any]


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

    @property
    def tokens(self) -> int:
        return self.batch * self.q_len


def _cfg(row: Row, cfg: lc.LaunchConfig) -> Row:
    row.update(kernel=cfg.kernel, grid=list(cfg.grid), config=cfg.config_dict())
    return row


def gemm_row(p: PassShape, module: str, layer: int, m: int, n: int, k: int, w: WeightChoice,
             bias: bool) -> Row:
    cfg = lc.gemm_config(m, n, k, w.w_format, w.bits, w.group_size, on_gpu=p.on_gpu)
    return _cfg({"op": "gemm", "module": module, "layer": layer, "m": m, "n": n, "k": k,
                 "w_format": w.w_format, "w_bits": w.bits, "group_size": w.group_size,
                 "a_dtype": "fp16", "out_dtype": "fp16", "bias": bias}, cfg)


def rowwise_row(p: PassShape, op: str, kernel: str, module: str, layer: int, m: int, n: int,
                k: int | None = None) -> Row:
    cfg = lc.rowwise_config(kernel, m, k or n, on_gpu=p.on_gpu)
    return _cfg({"op": op, "module": module, "layer": layer, "m": m, "n": n, "k": k}, cfg)


def attention_row(spec: ModelSpec, p: PassShape, layer: int) -> Row:
    decode = p.phase == "decode"
    bits = p.kv_bits if decode else 16  # prefill attends over the fresh fp16 K/V of the prompt
    if decode:
        cfg = lc.attention_decode_config(p.batch, spec.num_heads, spec.num_kv_heads, spec.head_dim,
                                         p.kv_len, bits, p.kv_block, on_gpu=p.on_gpu)
    else:
        cfg = lc.attention_prefill_config(p.batch, p.q_len, spec.num_heads, spec.num_kv_heads,
                                          spec.head_dim, on_gpu=p.on_gpu)
    return _cfg({"op": "attention", "module": "attn", "layer": layer, "batch": p.batch,
                 "q_len": p.q_len, "kv_len": p.kv_len, "num_q_heads": spec.num_heads,
                 "num_kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim, "k_bits": bits,
                 "v_bits": bits, "causal": True, "kv_block": p.kv_block if decode else None}, cfg)


def kv_write_row(spec: ModelSpec, p: PassShape, layer: int) -> Row:
    cfg = lc.kv_quant_config(p.tokens, spec.num_kv_heads, spec.head_dim, p.kv_bits, on_gpu=p.on_gpu)
    return _cfg({"op": "kv_quant", "module": "kv_write", "layer": layer, "batch": p.batch,
                 "q_len": p.q_len, "num_kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
                 "k_bits": p.kv_bits, "v_bits": p.kv_bits,
                 "kv_block": p.kv_block}, cfg)


def _norm_kernel(spec: ModelSpec) -> str:
    return "rms_norm_kernel" if spec.norm == "rms" else "layer_norm_kernel"


def layer_rows(spec: ModelSpec, p: PassShape, layer: int) -> Iterator[Row]:
    m, h, w = p.tokens, spec.hidden, p.weights
    shapes = spec.linear_shapes()
    mlp_up, mlp_down = ("gate_up", "down") if spec.mlp == "swiglu" else ("fc1", "fc2")
    yield rowwise_row(p, "norm", _norm_kernel(spec), "attn_norm", layer, m, h)
    yield gemm_row(p, "qkv", layer, m, *shapes["qkv"][:2], w, shapes["qkv"][2])
    yield rowwise_row(p, "rope", "rope_kernel", "rope", layer, m, spec.q_dim + spec.kv_dim, spec.rot_dim)
    yield kv_write_row(spec, p, layer)
    yield attention_row(spec, p, layer)
    yield gemm_row(p, "o", layer, m, *shapes["o"][:2], w, shapes["o"][2])
    if not spec.parallel_attn_mlp:
        yield rowwise_row(p, "other", "residual_add_kernel", "attn_residual", layer, m, h)
        yield rowwise_row(p, "norm", _norm_kernel(spec), "mlp_norm", layer, m, h)
    yield gemm_row(p, mlp_up, layer, m, *shapes[mlp_up][:2], w, shapes[mlp_up][2])
    if spec.mlp == "swiglu":
        yield rowwise_row(p, "act", "silu_mul_kernel", "act", layer, m, spec.ffn, 2 * spec.ffn)
    else:
        yield rowwise_row(p, "act", "gelu_kernel", "act", layer, m, spec.ffn, spec.ffn)
    yield gemm_row(p, mlp_down, layer, m, *shapes[mlp_down][:2], w, shapes[mlp_down][2])
    if spec.parallel_attn_mlp:
        yield rowwise_row(p, "other", "residual_add_kernel", "attn_residual", layer, m, h)
    yield rowwise_row(p, "other", "residual_add_kernel", "mlp_residual", layer, m, h)


def pass_rows(spec: ModelSpec, p: PassShape) -> list[Row]:
    """Every launch of one forward pass, in order, with phase and step filled."""
    rows: list[Row] = [rowwise_row(p, "embed", "embedding_kernel", "embed", -1, p.tokens, spec.hidden)]
    for layer in range(spec.num_layers):
        rows.extend(layer_rows(spec, p, layer))
    if p.phase == "prefill":  # gather each sequence's last prompt position (the embedding kernel)
        rows.append(rowwise_row(p, "embed", "embedding_kernel", "last_token_gather", -1, p.batch,
                                spec.hidden))
    rows.append(rowwise_row(p, "norm", _norm_kernel(spec), "final_norm", -1, p.batch, spec.hidden))
    rows.append(gemm_row(p, "lm_head", -1, p.batch, spec.vocab, spec.hidden, FP16_WEIGHTS,
                         spec.lm_head_bias))
    rows.append(rowwise_row(p, "sample", "argmax_kernel", "sample", -1, p.batch, spec.vocab))
    for r in rows:
        r.update(phase=p.phase, step=p.step)
    return rows
