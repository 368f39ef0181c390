"""Validation of a launch table (a DataFrame): every problem names the file, the row and the column.

The columns and their types are checked and coerced here, with pandas (a value of the wrong kind,
or one past its storage type, names its row: an O(n) search, not a per-row loop); the values are
checked by traces/checks.py on the typed columns, the same checks the pandas-free write runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpsim.traces.checks import check_values, fail
from mpsim.traces.columns import from_frame
from mpsim.traces.errors import TraceError
from mpsim.traces.schema import COLUMNS, STORAGE


def validate_frame(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check columns, types and values; return the frame with the storage dtypes (schema.STORAGE)."""
    typed = typed_frame(frame, where)
    check_values(from_frame(typed), where)
    return typed


def typed_frame(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check the columns and their types (not the values); the frame with the storage dtypes."""
    _check_columns(frame, where)
    return coerce_types(frame.reset_index(drop=True), where)


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
            raise fail(where, row, col, f"{typed.iloc[row]} is out of the range this column holds "
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
        raise fail(where, row, col, f"expected {COLUMNS[col]} values ({exc})") from None


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
