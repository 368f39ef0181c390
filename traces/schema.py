"""The trace row: one kernel launch, the contract between engine, synthesizer, simulator and analysis.

Change it here only, and bump SCHEMA_VERSION when columns or their meaning change.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

SCHEMA_VERSION = 1

OPS = ("gemm", "attention", "kv_quant", "norm", "rope", "act", "embed", "sample", "other")
PHASES = ("prefill", "decode")
W_FORMATS = ("fp16", "int8-group", "int4-group", "int3-group", "int2-group", "anyprec")
KV_BITS = (16, 8, 4)
DTYPES = ("fp16", "bf16", "fp32", "int8", "int32", "int64")

# Column name -> pandas dtype (nullable extension types, so "not applicable" is <NA>, not NaN or -1).
COLUMNS: dict[str, str] = {
    # identity
    "launch_id": "Int64", "stream": "Int64", "kernel": "string", "op": "string",
    "phase": "string", "step": "Int64", "layer": "Int64", "module": "string",
    # gemm (m, n also give rows x width for the small row-wise ops)
    "m": "Int64", "n": "Int64", "k": "Int64", "w_format": "string", "w_bits": "Int64",
    "group_size": "Int64", "a_dtype": "string", "out_dtype": "string", "bias": "boolean",
    # attention and KV writes
    "batch": "Int64", "q_len": "Int64", "kv_len": "Int64", "num_q_heads": "Int64",
    "num_kv_heads": "Int64", "head_dim": "Int64", "k_bits": "Int64", "v_bits": "Int64",
    "causal": "boolean", "kv_block": "Int64",
    # launch config, JSON text
    "grid": "string", "config": "string",
    # analytic accounting (traces.accounting.launch_cost)
    "flops": "Int64", "bytes_read": "Int64", "bytes_written": "Int64",
    # measurement
    "measured_us": "Float64", "device": "string",
}

REQUIRED = ("launch_id", "stream", "kernel", "op", "phase", "step", "layer", "module",
            "grid", "config", "flops", "bytes_read", "bytes_written")
REQUIRED_BY_OP: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "w_format", "w_bits"),
    "attention": ("batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim",
                  "k_bits", "v_bits", "causal"),
    "kv_quant": ("batch", "q_len", "num_kv_heads", "head_dim", "k_bits", "v_bits"),
    "norm": ("m", "n"), "rope": ("m", "n", "k"), "act": ("m", "n", "k"),
    "embed": ("m", "n"), "sample": ("m", "n"), "other": ("m", "n"),
}
NON_NEGATIVE = ("step", "m", "n", "k", "w_bits", "group_size", "batch", "q_len", "kv_len",
                "num_q_heads", "num_kv_heads", "head_dim", "k_bits", "v_bits", "kv_block",
                "flops", "bytes_read", "bytes_written", "measured_us", "launch_id", "stream")


@dataclass(frozen=True)
class TraceRow:
    """One launch. Field names and meaning are those of COLUMNS; None means not applicable."""

    launch_id: int
    kernel: str
    op: str
    phase: str
    step: int
    layer: int
    module: str
    grid: str
    config: str
    flops: int
    bytes_read: int
    bytes_written: int
    stream: int = 0
    m: int | None = None
    n: int | None = None
    k: int | None = None
    w_format: str | None = None
    w_bits: int | None = None
    group_size: int | None = None
    a_dtype: str | None = None
    out_dtype: str | None = None
    bias: bool | None = None
    batch: int | None = None
    q_len: int | None = None
    kv_len: int | None = None
    num_q_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    k_bits: int | None = None
    v_bits: int | None = None
    causal: bool | None = None
    kv_block: int | None = None
    measured_us: float | None = None
    device: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
