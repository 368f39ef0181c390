"""The trace contract's value checks, over columns in their storage types (traces/columns.py).

Columnar: each check runs over whole arrays (NA flags, ranges, allowed values); text columns are
codes into a few names, so the grid and config JSON is parsed once per distinct string, not once per
row. Only when a column fails is its first bad row searched for, and the error names it. Used on
read (traces/validate.py, after the types are coerced) and on write (traces/write.py), without
pandas.
"""

from __future__ import annotations

import json

import numpy as np

from mpsim.traces.columns import Numbers, Text, TraceColumns
from mpsim.traces.errors import TraceError
from mpsim.traces.schema import (
    COMM_LIBRARIES,
    FORMAT_BITS,
    KV_BITS,
    KV_FORMATS,
    NON_NEGATIVE,
    OPS,
    PHASES,
    POSITIVE,
    REQUIRED,
    REQUIRED_BY_OP,
    W_FORMATS,
)

ENUMS: dict[str, tuple[object, ...]] = {
    "op": OPS, "phase": PHASES, "w_format": W_FORMATS, "k_bits": KV_BITS, "v_bits": KV_BITS,
    "comm_library": COMM_LIBRARIES,
    "kv_format": tuple(KV_FORMATS),
}


def check_values(columns: TraceColumns, where: str) -> None:
    """Required values present, enumerations known, sizes non-negative, grid and config JSON."""
    check_required(columns, where)
    check_enums(columns, where)
    check_non_negative(columns, where)
    check_weight_bits(columns, where)
    check_kv_format_bits(columns, where)
    check_times(columns, where)
    check_json(columns, where)


def fail(where: str, row: int, column: str, reason: str) -> TraceError:
    return TraceError(f"{where}: row {row}, column '{column}': {reason}")


def first(mask: np.ndarray) -> int | None:
    """The first row where `mask` holds, or None."""
    hits = mask.nonzero()[0]
    return int(hits[0]) if len(hits) else None


def check_required(columns: TraceColumns, where: str) -> None:
    na: dict[str, np.ndarray] = {}

    def missing(col: str) -> np.ndarray:
        if col not in na:
            na[col] = columns[col].na
        return na[col]

    for col in REQUIRED:
        row = first(missing(col))
        if row is not None:
            raise fail(where, row, col, "is empty but required for every launch")
    ops = columns["op"]
    assert isinstance(ops, Text)
    for op, cols in REQUIRED_BY_OP.items():
        if op not in ops.names:
            continue
        rows = np.flatnonzero(ops.codes == ops.names.index(op))
        for col in cols:
            hit = first(missing(col)[rows])
            if hit is not None:
                raise fail(where, int(rows[hit]), col, f"is empty but required for op '{op}'")


def check_enums(columns: TraceColumns, where: str) -> None:
    for col, values in ENUMS.items():
        c = columns[col]
        if isinstance(c, Text):  # check the few names, then find the rows
            unknown = [i for i, name in enumerate(c.names) if name not in values]
            row = first(np.isin(c.codes, unknown)) if unknown else None
        else:
            known = np.isin(c.values, np.array(values)) | c.na
            row = first(~known)
        if row is not None:
            value = c.value(row)
            value = value.item() if hasattr(value, "item") else value
            raise fail(where, row, col, f"unknown value {value!r}; expected one of {list(values)}")


def check_non_negative(columns: TraceColumns, where: str) -> None:
    for col in NON_NEGATIVE:
        c = columns[col]
        assert isinstance(c, Numbers)
        if not len(c.values) or c.values.min() >= 0:  # a reduction first (NA holds 0 or NaN)
            continue
        row = first((c.values < 0) & ~c.na)
        if row is not None:
            raise fail(where, row, col, f"must be >= 0, got {c.value(row)}")
    for col in POSITIVE:
        c = columns[col]
        assert isinstance(c, Numbers)
        row = first((c.values < 1) & ~c.na)
        if row is not None:
            raise fail(where, row, col, f"must be >= 1, got {c.value(row)}")


def check_weight_bits(columns: TraceColumns, where: str) -> None:
    """A launch's w_bits is the one its w_format stores (any-precision: one of the parent's widths):
    the simulator prices w_bits and the roofline w_format, so a disagreement would give two answers."""
    fmt, bits = columns["w_format"], columns["w_bits"]
    assert isinstance(fmt, Text) and isinstance(bits, Numbers)
    for code, name in enumerate(fmt.names):
        allowed = FORMAT_BITS.get(name)
        if allowed is None:
            continue
        row = first((fmt.codes == code) & ~bits.na & ~np.isin(bits.values, allowed))
        if row is not None:
            raise fail(where, row, "w_bits", f"{bits.value(row)} disagrees with w_format {name!r} "
                       f"(expected {' or '.join(map(str, allowed))})")


def check_kv_format_bits(columns: TraceColumns, where: str) -> None:
    """A launch's k_bits is the one its kv_format stores (fp8-e4m3 and int8: 8)."""
    fmt, bits = columns["kv_format"], columns["k_bits"]
    assert isinstance(fmt, Text) and isinstance(bits, Numbers)
    for code, name in enumerate(fmt.names):
        if name not in KV_FORMATS:
            continue
        row = first((fmt.codes == code) & ~bits.na & (bits.values != KV_FORMATS[name]))
        if row is not None:
            raise fail(where, row, "k_bits", f"{bits.value(row)} disagrees with kv_format {name!r} "
                       f"(expected {KV_FORMATS[name]})")


def check_times(columns: TraceColumns, where: str) -> None:
    """A measured time is finite where present (empty: not measured)."""
    c = columns["measured_us"]
    assert isinstance(c, Numbers)
    row = first(~c.na & ~np.isfinite(c.values))
    if row is not None:
        raise fail(where, row, "measured_us", f"expected a finite time in microseconds, got {c.value(row)}")


def check_json(columns: TraceColumns, where: str) -> None:
    """Each distinct grid and config string parsed once; a bad one is reported at its first row."""
    for col in ("grid", "config"):
        c = columns[col]
        assert isinstance(c, Text)
        bad = [code for code, text in enumerate(c.names) if not _is_json(text)]
        if bad:
            row = int(np.flatnonzero(np.isin(c.codes, bad))[0])
            raise fail(where, row, col, f"not JSON text: {c.value(row)!r}")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True
