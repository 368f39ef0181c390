"""Launch keys: which launches of a trace are identical for the simulator (the memo's unit).

Two launches are identical when their shapes, formats, config, grid and cache state match. Decode
attention is bucketed: its KV length is rounded up to a whole number of the kernel's KV tiles
(BLOCK_N, the same tiles the kernel walks; its grid depends on the tile count only), so the 2048
decode steps of a generation hit a few dozen keys instead of 2048. Its `kv_tokens` (the batch's KV
tokens) is bucketed the same way per sequence: batch x the mean length rounded up to whole tiles
(batch x the bucketed kv_len for a uniform batch). Rounding up keeps every simulated time at or above
the exact launch's roofline bound. Cache state is the bytes the previous launch
wrote, capped at what can stay resident (the usable L2; 0 on a model without residency).
All of it is vectorized over the trace: one grouping pass, no per-row Python.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mpsim.traces.accounting import launch_cost

KEY_COLUMNS = (
    "kernel", "op", "m", "n", "k", "w_format", "w_bits", "group_size", "a_dtype", "out_dtype",
    "bias", "batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim", "k_bits",
    "v_bits", "causal", "kv_block", "kv_tokens", "grid", "config",
)
DECODE_ATTENTION = "attention_decode_kernel"


def bucketed_kv(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(kv_len, kv_tokens) with decode attention rows rounded up to whole KV tiles (config block_n):
    kv_len itself, kv_tokens per sequence (batch x the mean length rounded up)."""
    kv = rows["kv_len"].copy()
    tokens = rows["kv_tokens"].copy() if "kv_tokens" in rows.columns else \
        pd.Series(pd.array([pd.NA] * len(rows), dtype="Int64"), index=rows.index)
    decode = (rows["kernel"] == DECODE_ATTENTION).fillna(False).to_numpy(dtype=bool)
    if not decode.any():
        return kv, tokens
    configs = rows.loc[decode, "config"].astype(str)
    tile_of = {c: int(json.loads(c).get("block_n") or 1) for c in configs.unique()}
    tiles = configs.map(tile_of).to_numpy(dtype=np.int64)
    lengths = kv[decode].to_numpy(dtype=np.int64)
    batch = rows.loc[decode, "batch"].to_numpy(dtype=np.int64)
    given = tokens[decode].to_numpy(dtype=np.float64, na_value=np.nan)
    total = np.where(np.isnan(given), batch * lengths, given).astype(np.int64)
    mean = -(-total // batch)
    kv.loc[decode] = -(-lengths // tiles) * tiles
    tokens.loc[decode] = batch * (-(-mean // tiles) * tiles)
    return kv, tokens


def resident_bytes(rows: pd.DataFrame, cap: float) -> np.ndarray:
    """What the previous launch wrote, capped at `cap` (0 for the first launch)."""
    written = rows["bytes_written"].to_numpy(dtype=np.float64)
    prev = np.concatenate([[0.0], written[:-1]])
    return np.minimum(prev, cap)


def launch_keys(rows: pd.DataFrame, resident_cap: float) -> tuple[np.ndarray, pd.DataFrame]:
    """(code per row, one representative row per code) with bucketed kv_len and `resident`."""
    frame = rows.reindex(columns=list(KEY_COLUMNS)).copy()
    frame["kv_len"], frame["kv_tokens"] = bucketed_kv(rows)
    frame["resident"] = resident_bytes(rows, resident_cap)
    codes = frame.groupby(list(frame.columns), dropna=False, sort=False).ngroup().to_numpy()
    _, first = np.unique(codes, return_index=True)
    reps = frame.iloc[first].copy()
    reps["launch_id"] = rows["launch_id"].to_numpy()[first]
    return codes, reps.reset_index(drop=True)


def plain(value: Any) -> Any:
    """A JSON-ready Python value (NA -> None, numpy scalars -> Python)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def rep_row(rep: Mapping[str, Any]) -> dict[str, Any]:
    """A representative key row as a full launch row: plain values plus re-derived accounting."""
    row = {k: plain(v) for k, v in rep.items()}
    cost = launch_cost(row)
    row.update(flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written)
    return row


def key_text(row: Mapping[str, Any]) -> str:
    """The memo key of a representative row: its key columns and cache state, as sorted JSON."""
    return json.dumps({c: row[c] for c in (*KEY_COLUMNS, "resident")}, sort_keys=True)
