"""Validation of a launch table on read: every problem names the file, the row and the column.

Columnar: every check runs over whole columns (dtypes, ranges, allowed values); text columns are
categorical, so the grid and config JSON is parsed once per distinct string, not once per row. Only
when a column fails does a search find the first bad row, and it takes O(n), not a per-row loop.
"""

from __future__ import annotations

import json

import numpy as np
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
    STORAGE,
    W_FORMATS,
)


def validate_frame(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check columns, types and values; return the frame with the storage dtypes (schema.STORAGE)."""
    _check_columns(frame, where)
    typed = coerce_types(frame.reset_index(drop=True), where)
    _check_required(typed, where)
    _check_enums(typed, where)
    _check_non_negative(typed, where)
    _check_json(typed, where)
    return typed


def _fail(where: str, row: int, column: str, reason: str) -> TraceError:
    return TraceError(f"{where}: row {row}, column '{column}': {reason}")


def _check_columns(frame: pd.DataFrame, where: str) -> None:
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(f"{where}: missing column(s) {missing}")
    extra = [c for c in frame.columns if c not in COLUMNS]
    if extra:
        raise TraceError(f"{where}: unexpected column(s) {extra}; the trace schema has {list(COLUMNS)}")


def coerce_types(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """The COLUMNS of `frame`, each in its storage dtype (no value checks beyond the types): cast to
    the contract's type (COLUMNS) first, so a value of the wrong kind fails with the contract's name
    for it, then narrowed (STORAGE); a column already in its storage dtype is kept as it is."""
    return pd.DataFrame({col: _coerce(frame[col], col, where) for col in COLUMNS}, copy=False)


def _coerce(series: pd.Series, col: str, where: str) -> pd.Series:
    storage = STORAGE[col]
    if storage == "category":
        if _text_categories(series):
            return _canonical_categories(series)
        return _canonical_categories(_cast(series, col, where).astype("category"))
    if series.dtype == storage:
        return series
    typed = _cast(series, col, where)
    if storage.startswith("Int") and storage != COLUMNS[col]:
        info = np.iinfo(storage.lower())
        row = _first((typed < info.min) | (typed > info.max))
        if row is not None:
            raise _fail(where, row, col, f"{typed.iloc[row]} is out of the range this column holds "
                                         f"({info.min}..{info.max})")
    return typed.astype(storage)


def _cast(series: pd.Series, col: str, where: str) -> pd.Series:
    """`series` as the contract's type of `col`; a value that is not one names its row."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    try:
        return series.astype(COLUMNS[col])
    except (TypeError, ValueError) as exc:
        row = _first_uncastable(series, COLUMNS[col])
        raise _fail(where, row, col, f"expected {COLUMNS[col]} values ({exc})") from None


def _text_categories(series: pd.Series) -> bool:
    return (isinstance(series.dtype, pd.CategoricalDtype)
            and series.cat.categories.inferred_type in ("string", "empty"))


def _canonical_categories(series: pd.Series) -> pd.Series:
    """Categories of pandas' default text type, sorted and all used, so that equal columns compare
    equal whatever their history (synthesized, read from Parquet, sliced)."""
    cats, codes = series.cat.categories, series.cat.codes.to_numpy()
    used = np.bincount(codes.astype(np.intp) + 1, minlength=len(cats) + 1)[1:] > 0  # code -1: NA
    if used.all() and cats.is_monotonic_increasing and cats.dtype == "str":
        return series
    return series.cat.set_categories(pd.Index(sorted(cats[used]), dtype="str"))


def _first_uncastable(series: pd.Series, dtype: str) -> int:
    """The first row whose value does not cast to `dtype`: bisection over whole slices, O(n)."""
    lo, hi = 0, len(series)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            series.iloc[lo:mid].astype(dtype)
            lo = mid
        except (TypeError, ValueError):
            hi = mid
    return lo


def _first(mask: pd.Series | np.ndarray) -> int | None:
    """The first row where `mask` holds (NA counts as not), or None."""
    values = mask.to_numpy(dtype=bool, na_value=False) if isinstance(mask, pd.Series) else mask
    hits = values.nonzero()[0]
    return int(hits[0]) if len(hits) else None


def _check_required(frame: pd.DataFrame, where: str) -> None:
    na: dict[str, np.ndarray] = {}

    def missing(col: str) -> np.ndarray:
        if col not in na:
            na[col] = frame[col].isna().to_numpy()
        return na[col]

    for col in REQUIRED:
        row = _first(missing(col))
        if row is not None:
            raise _fail(where, row, col, "is empty but required for every launch")
    ops = frame["op"]
    for op, cols in REQUIRED_BY_OP.items():
        if op not in ops.cat.categories:
            continue
        rows = np.flatnonzero(ops.cat.codes.to_numpy() == ops.cat.categories.get_loc(op))
        for col in cols:
            hit = _first(missing(col)[rows])
            if hit is not None:
                raise _fail(where, int(rows[hit]), col, f"is empty but required for op '{op}'")


def _check_enums(frame: pd.DataFrame, where: str) -> None:
    allowed: dict[str, tuple[object, ...]] = {
        "op": OPS, "phase": PHASES, "w_format": W_FORMATS, "k_bits": KV_BITS, "v_bits": KV_BITS,
    }
    for col, values in allowed.items():
        series = frame[col]
        if isinstance(series.dtype, pd.CategoricalDtype):  # check the few categories, then find them
            unknown = [i for i, c in enumerate(series.cat.categories) if c not in values]
            row = _first(np.isin(series.cat.codes.to_numpy(), unknown)) if unknown else None
        else:
            known = np.isin(series.to_numpy(dtype=np.int64, na_value=values[0]), np.array(values))
            row = _first(~known)
        if row is not None:
            value = frame[col].iloc[row]
            value = value.item() if hasattr(value, "item") else value
            raise _fail(where, row, col, f"unknown value {value!r}; expected one of {list(values)}")


def _check_non_negative(frame: pd.DataFrame, where: str) -> None:
    for col in NON_NEGATIVE:
        series = frame[col]
        low = series.min()  # a reduction first; the rows are searched only when one is negative
        if low is pd.NA or low >= 0:
            continue
        row = _first(series.to_numpy(dtype=series.dtype.numpy_dtype, na_value=0) < 0)
        if row is not None:
            raise _fail(where, row, col, f"must be >= 0, got {frame[col].iloc[row]}")


def _check_json(frame: pd.DataFrame, where: str) -> None:
    """Each distinct grid and config string parsed once; a bad one is reported at its first row."""
    for col in ("grid", "config"):
        series = frame[col]
        bad = [code for code, text in enumerate(series.cat.categories) if not _is_json(text)]
        if bad:
            row = int(np.flatnonzero(np.isin(series.cat.codes.to_numpy(), bad))[0])
            raise _fail(where, row, col, f"not JSON text: {series.iloc[row]!r}")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True
