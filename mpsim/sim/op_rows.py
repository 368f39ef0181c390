"""Single-launch trace rows from shapes, with the config kernels/launch_config.py would choose.

What `mpsim op gemm|attention` simulates, and what property tests feed the models: the same row a
synthesized trace would carry (config, grid, analytic bytes and FLOPs), without a model or policy.
"""

from __future__ import annotations

import json
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import KV_BITS, W_FORMATS

FORMAT_FAMILIES = ("fp16", "group", "anyprec")


def weight_format(family: str, bits: int) -> str:
    """The trace's w_format for a family ("fp16", "group", "anyprec") or a full spelling."""
    if family in W_FORMATS:
        return family
    if family == "group":
        return f"int{bits}-group"
    if family in ("fp16", "anyprec"):
        return family
    raise MpsimInputError(f"weight format {family!r}: expected one of {FORMAT_FAMILIES} or {W_FORMATS}")


def _finish(row: dict[str, Any], cfg: lc.LaunchConfig) -> dict[str, Any]:
    row.update(launch_id=0, stream=0, kernel=cfg.kernel, grid=json.dumps(list(cfg.grid)),
               config=json.dumps(cfg.config_dict(), sort_keys=True), step=0, layer=0)
    cost = launch_cost(row)
    row.update(flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written)
    return row


def gemm_row(m: int, n: int, k: int, w_format: str = "fp16", bits: int = 16,
             group_size: int | None = None, bias: bool = False) -> dict[str, Any]:
    """y = x @ W.T for an M x K activation and an N x K weight stored in `w_format` at `bits`."""
    fmt = weight_format(w_format, bits)
    if fmt == "fp16":
        bits, group_size = 16, None
    elif fmt.endswith("-group"):
        bits = int(fmt[3:fmt.index("-")])
        group_size = 128 if group_size is None else group_size
    if min(m, n, k) < 1:
        raise MpsimInputError(f"gemm: m, n, k must be >= 1, got m={m}, n={n}, k={k}")
    try:
        cfg = lc.gemm_config(m, n, k, fmt, bits, group_size)
    except ValueError as exc:
        raise MpsimInputError(f"gemm: {exc}") from None
    row = {"op": "gemm", "phase": "decode" if m <= lc.GEMV_MAX_ROWS else "prefill",
           "module": "gemm", "m": m, "n": n, "k": k, "w_format": fmt, "w_bits": bits,
           "group_size": group_size, "a_dtype": "fp16", "out_dtype": "fp16", "bias": bias}
    return _finish(row, cfg)


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int = 16, kv_block: int | None = None) -> dict[str, Any]:
    """Decode attention (q_len 1, over a cache of kv_bits) or causal prefill (q_len > 1, fp16)."""
    if kv_bits not in KV_BITS:
        raise MpsimInputError(f"attention: kv bits must be one of {KV_BITS}, got {kv_bits}")
    if min(batch, q_len, kv_len, heads, kv_heads, head_dim) < 1 or kv_len < q_len:
        raise MpsimInputError("attention: sizes must be >= 1 and kv_len >= q_len")
    if heads % kv_heads:
        raise MpsimInputError(f"attention: heads {heads} is not a multiple of kv_heads {kv_heads}")
    decode = q_len == 1
    if not decode and kv_bits != 16:
        raise MpsimInputError("attention: prefill (q_len > 1) attends to fp16 K/V; --kv-bits "
                              "applies to decode (q_len 1)")
    if decode:
        cfg = lc.attention_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_bits, kv_block)
    else:
        cfg = lc.attention_prefill_config(batch, q_len, heads, kv_heads, head_dim)
    row = {"op": "attention", "phase": "decode" if decode else "prefill", "module": "attn",
           "batch": batch, "q_len": q_len, "kv_len": kv_len, "num_q_heads": heads,
           "num_kv_heads": kv_heads, "head_dim": head_dim, "k_bits": kv_bits, "v_bits": kv_bits,
           "causal": True, "kv_block": kv_block if decode else None}
    return _finish(row, cfg)
