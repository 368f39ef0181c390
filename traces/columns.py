"""Trace columns as plain numpy arrays, in their storage types (schema.STORAGE), without pandas.

What synthesis builds and the Parquet writer stores: a number or boolean column is its values in the
storage width beside NA flags (`Numbers`); a text column is integer codes into its sorted, all-used
names, -1 for NA (`Text`). `to_arrow` makes the Arrow table the trace file holds and `from_arrow` takes
a column of it back (both zero-copy where Arrow allows), `to_frame` the pandas DataFrame a Trace
holds (pandas loads only there), `from_frame` the columns of a typed DataFrame (traces/validate.py:
coerce_types).
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


def from_arrow(col: str, chunked: pa.ChunkedArray) -> Column | None:
    """A file's column over Arrow's memory (read-only values; NA flags, booleans and the codes of a
    text column with NA are new arrays), or None when it is not stored in its storage type."""
    import pyarrow as pa

    arr = chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()
    n, na = len(arr), _nulls(arr)
    if STORAGE[col] == "category":
        if not (pa.types.is_dictionary(arr.type) and arr.type.value_type in (pa.string(), pa.large_string())
                and arr.type.index_type in (pa.int8(), pa.int32())):
            return None
        codes = _values(arr.indices)
        if na.any():
            codes = np.where(na, codes.dtype.type(-1), codes)
        return canonical(Text(codes, tuple(arr.dictionary.to_pylist())))
    dtype = numpy_dtype(col)
    if arr.type != pa.from_numpy_dtype(dtype):
        return None
    if dtype == np.bool_:  # Arrow's booleans are bits
        bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return Numbers(np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + n].astype(bool), na)
    return Numbers(_values(arr), na)


def _values(arr: pa.Array) -> np.ndarray:
    """A fixed-width array's values, over its buffer."""
    dtype = np.dtype(arr.type.to_pandas_dtype())
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _nulls(arr: pa.Array) -> np.ndarray:
    """True where `arr` is null (its validity bitmap, unpacked)."""
    n = len(arr)
    if arr.null_count == 0:
        return np.zeros(n, dtype=bool)
    if arr.null_count == n:
        return np.ones(n, dtype=bool)
    bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + n] == 0


def canonical(text: Text) -> Text:
    """`text` with its names sorted and each used (as synthesis makes them), so that equal columns
    compare equal whatever wrote them."""
    used = np.bincount(text.codes.astype(np.intp) + 1, minlength=len(text.names) + 1)[1:] > 0  # -1: NA
    names = list(text.names)
    if used.all() and names == sorted(names):
        return text
    keep = sorted(name for name, u in zip(names, used, strict=True) if u)
    new_code = {name: i for i, name in enumerate(keep)}
    table = np.array([new_code.get(name, -1) for name in names] + [-1], dtype=text.codes.dtype)
    return Text(table[text.codes.astype(np.intp)], tuple(keep))  # code -1 takes the last entry: -1


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

    import pyarrow as pa

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
            "creator": {"library": "pyarrow", "version": pa.__version__},
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
