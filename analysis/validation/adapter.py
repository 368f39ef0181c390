"""THE ADAPTER: one validated measured row -> the trace rows mpsim prices for it.

    launch_rows(row, config) -> LaunchGroup(launches, main)

This is the one place that decides which kernel, launch config and shapes stand for a published
measurement. Everything else in validation (readers, protocols, metrics, plots, calibration) works
on whatever it returns, through the one door `mpsim.sim.simulate`.

PLUG POINT (issue 11): today it builds the rows of mpsim's own Triton kernels with the heuristic
configs of kernels/launch_config.py (mpsim.launch_plan: gemm_row, attention_row, costed). The GPU
time model being ported (issue 11, branch issue11-model) prices published rows through its own
kernel names (`cublas_gemm`, `fa3_decode`, `fa3_prefill`, `trtllm_wo_gemv`, vLLM's row-wise ops) and
a model-guided best config; wiring it in means changing `_gemm`, `_attention`, `_rowwise` and
`_scope` below (and `best_config_available`), nothing else. The measured row's `protocol`,
`kv_dtype` ("fp8" for an e4m3 KV cache) and `cls` are there for that choice.

Launches come in the order the framework runs them (scope first: RoPE, KV append, then the
attention); `main` indexes the measured op itself, whose config the rows file reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import attention_row, costed, gemm_row
from mpsim.sim.protocols import scope_launches

Row = dict[str, Any]
CONFIG_CHOICES = ("best", "heuristic")


@dataclass(frozen=True)
class LaunchGroup:
    launches: list[Row]
    main: int


class UnrepresentableError(ValueError):
    """The row is well formed but the model has no launch for it (the message says why)."""


def best_config_available() -> bool:
    """Whether `config="best"` picks a model-guided config (False: the heuristic stands in)."""
    return False


def launch_rows(row: Mapping[str, Any], config: str = "best") -> LaunchGroup:
    """The launches one measured call runs, as trace rows (`row`: a generic measured row)."""
    if config not in CONFIG_CHOICES:
        raise ValueError(f"config {config!r}: expected one of {CONFIG_CHOICES}")
    op = str(row["op"])
    if op == "gemm":
        return LaunchGroup([_gemm(row, config)], 0)
    if op == "attention":
        scope = [_scope(kind, row) for kind in scope_launches(str(row.get("includes") or ""))]
        return LaunchGroup([*scope, _attention(row)], len(scope))
    if op in ROWWISE:
        return LaunchGroup([_rowwise(op, row)], 0)
    raise UnrepresentableError(f"op {op!r} has no mpsim launch")


def _int(row: Mapping[str, Any], key: str) -> int:
    return int(row[key])


def _gemm(row: Mapping[str, Any], config: str) -> Row:
    group = row.get("group_size")
    group = None if group is None or group != group else int(group)
    try:
        return gemm_row(_int(row, "m"), _int(row, "n"), _int(row, "k"), str(row["w_format"]),
                        _int(row, "w_bits"), group)
    except ValueError as exc:
        raise UnrepresentableError(str(exc)) from None


def _attention(row: Mapping[str, Any]) -> Row:
    try:
        return attention_row(_int(row, "batch"), _int(row, "q_len"), _int(row, "kv_len"),
                             _int(row, "heads"), _int(row, "kv_heads"), _int(row, "head_dim"),
                             _int(row, "kv_bits"))
    except ValueError as exc:
        raise UnrepresentableError(str(exc)) from None


def _single(fields: Row, cfg: lc.LaunchConfig, phase: str) -> Row:
    fields.update(launch_id=0, stream=0, step=0, layer=0, phase=phase, kernel=cfg.kernel,
                  grid=list(cfg.grid), config=cfg.config_dict())
    return costed(fields)


def _phase(tokens: int) -> str:
    return "decode" if tokens <= lc.GEMV_MAX_ROWS else "prefill"


# op -> (trace op, kernel, module); widths follow mpsim.launch_plan.layer_rows
ROWWISE = {
    "rmsnorm": ("norm", "rms_norm_kernel", "attn_norm"),
    "silu_mul": ("act", "silu_mul_kernel", "act"),
    "add": ("other", "residual_add_kernel", "mlp_residual"),
    "rope": ("rope", "rope_kernel", "rope"),
}


def _rowwise(op: str, row: Mapping[str, Any]) -> Row:
    kind, kernel, module = ROWWISE[op]
    tokens = _int(row, "tokens")
    if op == "rope":
        d = _int(row, "head_dim")
        n, k = (_int(row, "heads") + _int(row, "kv_heads")) * d, d
    else:
        n = _int(row, "hidden")
        k = 2 * n if op == "silu_mul" else None  # type: ignore[assignment]
    cfg = lc.rowwise_config(kernel, tokens, k or n)
    return _single({"op": kind, "module": module, "m": tokens, "n": n, "k": k}, cfg, _phase(tokens))


def _scope(kind: str, row: Mapping[str, Any]) -> Row:
    """A scope launch of an attention call: RoPE on the new Q and K, or the KV-cache append."""
    batch, q_len = _int(row, "batch"), _int(row, "q_len")
    heads, kv_heads, d = _int(row, "heads"), _int(row, "kv_heads"), _int(row, "head_dim")
    tokens = batch * q_len
    if kind == "rope":
        return _rowwise("rope", {"tokens": tokens, "heads": heads, "kv_heads": kv_heads, "head_dim": d})
    bits = _int(row, "kv_bits")
    cfg = lc.kv_quant_config(tokens, kv_heads, d, bits)
    return _single({"op": "kv_quant", "module": "kv_write", "batch": batch, "q_len": q_len,
                    "num_kv_heads": kv_heads, "head_dim": d, "k_bits": bits, "v_bits": bits},
                   cfg, _phase(tokens))
