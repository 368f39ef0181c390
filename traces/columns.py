"""Trace columns as plain numpy arrays, in their storage types (schema.STORAGE), without pandas.

What synthesis builds and the Parquet writer stores: a number or boolean column is its values in the
storage width beside NA flags (`Numbers`); a text column is integer codes into its sorted, all-used
names, -1 for NA (`Text`). `to_arrow` makes the Arrow table the trace file holds (zero-copy where
Arrow allows), `to_frame` the pandas DataFrame a Trace holds (pandas loads only there), `from_frame`
the columns of a typed DataFrame (traces/validate.py: coerce_types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mpsim.traces.schema import COLUMNS, STORAGE

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


@dataclass(frozen=True)
class Numbers:
    """An integer, float or boolean column: values in the storage width (any value under NA)."""

    values: np.ndarray
    na: np.ndarray  # bool, True where the value is NA

    def value(self, row: int) -> Any:
        return self.values[row]


@dataclass(frozen=True)
class Text:
    """A text column: codes into `names` (sorted, each used by some row), -1 for NA."""

    codes: np.ndarray
    names: tuple[str, ...]

    @property
    def na(self) -> np.ndarray:
        return self.codes < 0

    def value(self, row: int) -> Any:
        return None if self.codes[row] < 0 else self.names[self.codes[row]]


Column = Numbers | Text
TraceColumns = dict[str, Column]  # every name of schema.COLUMNS, in that order


def numpy_dtype(col: str) -> np.dtype[Any]:
    """The numpy type of a number or boolean column's values (schema.STORAGE)."""
    storage = STORAGE[col]
    return np.dtype({"boolean": "bool", "Float64": "float64"}.get(storage, storage.lower()))


def to_arrow(columns: TraceColumns) -> pa.Table:
    """The trace's Arrow table: numbers in their storage width with nulls for NA, text as
    dictionaries (int8 or int32 codes) of its sorted names. Built from the arrays' buffers (no
    copy of the values): pa.array would load pandas to ask whether each array is a Series."""
    import pyarrow as pa  # Arrow loads with the file it writes, not with synthesis

    arrays = []
    for col in COLUMNS:
        c = columns[col]
        if isinstance(c, Text):
            codes = _arrow_array(c.codes, c.na)
            arrays.append(pa.DictionaryArray.from_arrays(codes, _arrow_strings(c.names)))
        else:
            arrays.append(_arrow_array(c.values, c.na))
    return pa.Table.from_arrays(arrays, names=list(COLUMNS))


def _arrow_array(values: np.ndarray, na: np.ndarray) -> pa.Array:
    """`values` (integers, floats or booleans) with nulls where `na`, over the same memory."""
    import pyarrow as pa

    valid = pa.py_buffer(np.packbits(~na, bitorder="little")) if na.any() else None
    if values.dtype == np.bool_:  # Arrow's booleans are bits
        return pa.Array.from_buffers(pa.bool_(), len(values),
                                     [valid, pa.py_buffer(np.packbits(values, bitorder="little"))])
    data = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [valid, pa.py_buffer(data)])


def _arrow_strings(names: tuple[str, ...]) -> pa.Array:
    """`names` as an Arrow string array (UTF-8 bytes and their offsets)."""
    import pyarrow as pa

    data = [name.encode() for name in names]
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in data], dtype=np.int64)]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(names),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def pandas_metadata(columns: TraceColumns) -> dict[str, Any]:
    """The schema's b"pandas" entry, as pyarrow's Table.from_pandas writes it for the DataFrame
    `to_frame` gives, so that a reader that goes through pandas gets the storage dtypes back."""
    from importlib.metadata import version

    entries = []
    for col in COLUMNS:
        c = columns[col]
        if isinstance(c, Text):
            kind, numpy_type, meta = "categorical", str(c.codes.dtype), {
                "num_categories": len(c.names), "ordered": False}
        else:
            storage = STORAGE[col]
            kind = "bool" if storage == "boolean" else storage.lower()
            numpy_type, meta = storage, None
        entries.append({"name": col, "field_name": col, "pandas_type": kind, "numpy_type": numpy_type,
                        "metadata": meta})
    return {"index_columns": [], "column_indexes": [], "columns": entries, "attributes": {},
            "creator": {"library": "pyarrow", "version": version("pyarrow")},
            "pandas_version": version("pandas")}


def to_frame(columns: TraceColumns) -> pd.DataFrame:
    """The columns as the DataFrame a Trace holds (COLUMNS in order, STORAGE dtypes), no copies."""
    import pandas as pd  # only where the rows are wanted as a DataFrame

    out: dict[str, Any] = {}
    for col in COLUMNS:
        c = columns[col]
        if isinstance(c, Text):
            dtype = pd.CategoricalDtype(pd.Index(list(c.names), dtype="str"))
            out[col] = pd.Categorical.from_codes(c.codes, dtype=dtype, validate=False)
        elif STORAGE[col] == "boolean":
            out[col] = pd.arrays.BooleanArray(c.values, c.na)
        elif STORAGE[col] == "Float64":
            out[col] = pd.arrays.FloatingArray(c.values, c.na)
        else:
            out[col] = pd.arrays.IntegerArray(c.values, c.na)
    return pd.DataFrame(out, copy=False)


def from_frame(frame: pd.DataFrame) -> TraceColumns:
    """The columns of a DataFrame already in the storage dtypes with canonical categories
    (traces/validate.py: coerce_types)."""
    import pandas as pd

    out: TraceColumns = {}
    for col in COLUMNS:
        series = frame[col]
        if isinstance(series.dtype, pd.CategoricalDtype):
            out[col] = Text(series.cat.codes.to_numpy(), tuple(series.cat.categories))
        else:
            dtype = numpy_dtype(col)
            out[col] = Numbers(series.to_numpy(dtype=dtype, na_value=dtype.type(0)),
                               series.isna().to_numpy())
    return out
