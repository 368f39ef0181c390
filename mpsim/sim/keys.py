"""Launch keys: which launches of a trace are identical for the simulator (the memo's unit).

Two launches are identical when their shapes, formats, config, grid and cache state match. Decode
attention is bucketed: its KV length is rounded up to a whole number of the kernel's KV tiles
(BLOCK_N, the same tiles the kernel walks; its grid depends on the tile count only), so the 2048
decode steps of a generation hit a few dozen keys instead of 2048. Its `kv_tokens` (the batch's KV
tokens) is bucketed the same way per sequence: batch x the mean length rounded up to whole tiles
(batch x the bucketed kv_len for a uniform batch). Rounding up keeps every simulated time at or above
the exact launch's roofline bound. Cache state is the bytes the previous launch
wrote, capped at what can stay resident (the usable L2; 0 on a model without residency).
All of it is vectorized over the trace, no per-row Python: each key column is factorized on its
own (a categorical's codes as they are) and the codes are combined column by column into one
integer per launch, so no copy of the key columns is ever made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mpsim.kernels.launch_config import DECODE_ATTENTION_KERNEL
from mpsim.traces.accounting import launch_cost
from mpsim.traces.cells import plain
from mpsim.traces.schema import COLLECTIVE_OPS

KEY_COLUMNS = (
    "kernel", "op", "m", "n", "k", "w_format", "w_bits", "group_size", "a_dtype", "out_dtype",
    "bias", "batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim", "k_bits",
    "v_bits", "causal", "kv_block", "kv_tokens", "grid", "config", "tp", "msg_bytes", "comm_library",
)
# What only a collective row's price depends on (mpsim/sim/comm.py): factorized only in a trace that
# has collective rows (elsewhere constant: tp 1 or one rank's group, no message), the key unchanged.
COLLECTIVE_KEYS = ("tp", "msg_bytes", "comm_library")


def bucketed_kv(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(kv_len, kv_tokens) with decode attention rows rounded up to whole KV tiles (config block_n):
    kv_len itself, kv_tokens per sequence (batch x the mean length rounded up). New Series: the
    trace's own columns are never changed."""
    kv = rows["kv_len"]
    tokens = rows["kv_tokens"] if "kv_tokens" in rows.columns else \
        pd.Series(pd.array([pd.NA] * len(rows), dtype="Int64"), index=rows.index)
    decode = (rows["kernel"] == DECODE_ATTENTION_KERNEL).fillna(False).to_numpy(dtype=bool)
    if not decode.any():
        return kv, tokens
    codes, configs = _codes(rows["config"])  # each distinct config parsed once
    tile_of = np.array([int(json.loads(str(c)).get("block_n") or 1) for c in configs], dtype=np.int64)
    tiles = tile_of[codes[decode]]
    values = kv.to_numpy(dtype=np.int64, na_value=0, copy=True)
    lengths = values[decode]
    values[decode] = -(-lengths // tiles) * tiles
    batch = rows["batch"].to_numpy(dtype=np.int64, na_value=1)[decode]
    tok = tokens.to_numpy(dtype=np.int64, na_value=-1, copy=True)
    total = np.where(tok[decode] < 0, batch * lengths, tok[decode])  # none given: a uniform batch
    mean = -(-total // batch)  # per sequence, rounded up
    tok[decode] = batch * (-(-mean // tiles) * tiles)
    tok_na = tokens.isna().to_numpy().copy()
    tok_na[decode] = False
    return (pd.Series(pd.arrays.IntegerArray(values, kv.isna().to_numpy()), index=kv.index, name="kv_len"),
            pd.Series(pd.arrays.IntegerArray(tok, tok_na), index=kv.index, name="kv_tokens"))


def _codes(series: pd.Series) -> tuple[np.ndarray, Any]:
    """(code per row, distinct values): a categorical's own codes, else a factorization."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(), series.cat.categories
    return pd.factorize(series)


def resident_bytes(rows: pd.DataFrame, cap: float) -> np.ndarray:
    """What the previous launch wrote, capped at `cap` (0 for the first launch)."""
    written = rows["bytes_written"].to_numpy(dtype=np.float64)
    prev = np.concatenate([[0.0], written[:-1]])
    return np.minimum(prev, cap)


def launch_keys(rows: pd.DataFrame, resident_cap: float) -> tuple[np.ndarray, pd.DataFrame]:
    """(code per row, one representative row per code) with bucketed kv_len, kv_tokens and
    `resident`.

    Codes number the distinct keys in order of first appearance (0, 1, ...); NA is a value of its
    own in every column."""
    kv, tokens = bucketed_kv(rows)
    resident = resident_bytes(rows, resident_cap)
    bucketed = {"kv_len": kv, "kv_tokens": tokens}
    comm = bool(rows["op"].isin(COLLECTIVE_OPS).any())
    keyed = [c for c in KEY_COLUMNS if comm or c not in COLLECTIVE_KEYS]
    codes, first = distinct([bucketed.get(c, rows.get(c)) for c in keyed] + [pd.Series(resident)])
    reps = rows.iloc[first].reindex(columns=list(KEY_COLUMNS)).reset_index(drop=True)
    reps["kv_len"] = kv.iloc[first].array
    reps["kv_tokens"] = tokens.iloc[first].array
    reps["resident"] = resident[first]
    reps["launch_id"] = rows["launch_id"].to_numpy()[first]
    return codes, reps


def distinct(columns: list[pd.Series]) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, first row of each code) for the rows' values across `columns`: codes number
    the distinct value tuples in order of first appearance (0, 1, ...), NA a value of its own."""
    combined, size = np.zeros(len(columns[0]), dtype=np.int64), 1
    for series in columns:
        codes, count = _factor(series)
        if size * count >= 2**62:  # keep the combined code small: renumber the tuples so far
            combined, uniques = pd.factorize(combined)
            size = len(uniques)
        combined *= count  # in place: no new arrays per column
        combined += codes
        size *= count
    codes, _ = pd.factorize(combined)  # in order of first appearance, so a row is the first of its
    first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)  # code when the
    return codes, first  # running maximum of the codes steps up there


def _factor(series: pd.Series) -> tuple[np.ndarray, int]:
    """(code per row in 0..count-1, count) with NA a code of its own. Integers in a narrow range
    (shapes, bit widths) are their own codes (value - min + 1), no hashing."""
    if isinstance(series.dtype, pd.core.dtypes.dtypes.BaseMaskedDtype) and series.dtype.kind in "iu":
        low, high = series.min(), series.max()  # over the values present
        if low is pd.NA:
            return np.zeros(len(series), dtype=np.int64), 1
        if int(high) - int(low) < 2 * len(series) + 1024:
            # copy=True: an Int64 column would give its own buffer, which the next line changes
            codes = series.to_numpy(dtype=np.int64, na_value=int(low) - 1, copy=True)
            codes -= int(low) - 1  # NA -> 0, values -> 1..
            return codes, int(high) - int(low) + 2
    codes, uniques = _codes(series)
    out = codes.astype(np.int64)
    out += 1  # NA (-1) -> 0
    return out, len(uniques) + 1


def rep_row(rep: Mapping[str, Any]) -> dict[str, Any]:
    """A representative key row as a full launch row: plain values plus re-derived accounting."""
    row = {k: plain(v) for k, v in rep.items()}
    cost = launch_cost(row)
    row.update(flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written)
    return row


def key_text(row: Mapping[str, Any]) -> str:
    """The memo key of a representative row: its key columns and cache state, as sorted JSON."""
    return json.dumps({c: row[c] for c in (*KEY_COLUMNS, "resident")}, sort_keys=True)
