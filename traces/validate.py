"""Validation of a launch table on read: every problem names the file, the row and the column."""

from __future__ import annotations

import json

import pandas as pd

from mpsim.traces.errors import TraceError
from mpsim.traces.schema import (
    COLUMNS,
    KV_BITS,
    NON_NEGATIVE,
    OPS,
    PHASES,
    REQUIRED,
    REQUIRED_BY_OP,
    W_FORMATS,
)


def validate_frame(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check columns, types and values; return the frame with the canonical dtypes."""
    _check_columns(frame, where)
    typed = _coerce_types(frame[list(COLUMNS)], where)
    _check_required(typed, where)
    _check_enums(typed, where)
    _check_non_negative(typed, where)
    _check_json(typed, where)
    return typed.reset_index(drop=True)


def _fail(where: str, row: int, column: str, reason: str) -> TraceError:
    return TraceError(f"{where}: row {row}, column '{column}': {reason}")


def _check_columns(frame: pd.DataFrame, where: str) -> None:
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(f"{where}: missing column(s) {missing}")
    extra = [c for c in frame.columns if c not in COLUMNS]
    if extra:
        raise TraceError(f"{where}: unexpected column(s) {extra}; the trace schema has {list(COLUMNS)}")


def _coerce_types(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    out = {}
    for col, dtype in COLUMNS.items():
        try:
            out[col] = frame[col].astype(dtype)
        except (TypeError, ValueError) as exc:
            row = _first_uncastable(frame[col], dtype)
            raise _fail(where, row, col, f"expected {dtype} values ({exc})") from None
    return pd.DataFrame(out)


def _first_uncastable(series: pd.Series, dtype: str) -> int:
    for i, value in enumerate(series):
        try:
            pd.Series([value]).astype(dtype)
        except (TypeError, ValueError):
            return i
    return 0


def _first(mask: pd.Series) -> int | None:
    hits = mask.to_numpy(dtype=bool, na_value=False).nonzero()[0]
    return int(hits[0]) if len(hits) else None


def _check_required(frame: pd.DataFrame, where: str) -> None:
    for col in REQUIRED:
        row = _first(frame[col].isna())
        if row is not None:
            raise _fail(where, row, col, "is empty but required for every launch")
    for op, cols in REQUIRED_BY_OP.items():
        is_op = frame["op"] == op
        for col in cols:
            row = _first(is_op & frame[col].isna())
            if row is not None:
                raise _fail(where, row, col, f"is empty but required for op '{op}'")


def _check_enums(frame: pd.DataFrame, where: str) -> None:
    allowed: dict[str, tuple[object, ...]] = {
        "op": OPS, "phase": PHASES, "w_format": W_FORMATS, "k_bits": KV_BITS, "v_bits": KV_BITS,
    }
    for col, values in allowed.items():
        bad = frame[col].notna() & ~frame[col].isin(values)
        row = _first(bad)
        if row is not None:
            value = frame[col].iloc[row]
            value = value.item() if hasattr(value, "item") else value
            raise _fail(where, row, col, f"unknown value {value!r}; expected one of {list(values)}")


def _check_non_negative(frame: pd.DataFrame, where: str) -> None:
    for col in NON_NEGATIVE:
        row = _first(frame[col] < 0)
        if row is not None:
            raise _fail(where, row, col, f"must be >= 0, got {frame[col].iloc[row]}")


def _check_json(frame: pd.DataFrame, where: str) -> None:
    for col in ("grid", "config"):
        for i, text in enumerate(frame[col]):
            try:
                json.loads(text)
            except (TypeError, ValueError):
                raise _fail(where, i, col, f"not JSON text: {text!r}") from None
