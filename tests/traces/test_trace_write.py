"""The pandas-free write (traces/write.py: numpy columns straight to Arrow) gives the file pandas
gave: the same Arrow table and the same b"pandas" schema entry as pyarrow's Table.from_pandas of
the trace's DataFrame, so the file reads back the same through mpsim and through pandas."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize, synthesize_columns
from mpsim.traces.io import read_trace, write_trace
from mpsim.traces.schema import STORAGE
from mpsim.traces.write import write_columns
from mpsim.workload import Workload


def test_columns_write_the_table_pandas_writes(tmp_path: Path) -> None:
    args = (PRESETS["mobilellama-1.4b"], parse_policy("ap4-3"), Workload(16, 4, 2))
    columns, meta = synthesize_columns(*args)
    path = write_columns(columns, meta, tmp_path / "t.parquet")
    trace = synthesize(*args)
    pq.write_table(pa.Table.from_pandas(trace.rows, preserve_index=False), tmp_path / "pandas.parquet")
    table, want = pq.read_table(path), pq.read_table(tmp_path / "pandas.parquet")
    assert table.equals(want.replace_schema_metadata(table.schema.metadata))
    assert json.loads(table.schema.metadata[b"pandas"]) == json.loads(want.schema.metadata[b"pandas"])
    back = read_trace(path)
    pd.testing.assert_frame_equal(back.rows, trace.rows)
    assert back.meta == trace.meta
    assert {c: str(t) for c, t in pd.read_parquet(path).dtypes.items()} == STORAGE


def test_stored_columns_read_as_the_pandas_path_reads_them(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A file in the storage types is wrapped as it is; through pandas and coercion it reads the
    same, and a dictionary written unsorted, with a name no row uses, reads canonical."""
    import mpsim.traces.io as io

    trace = synthesize(PRESETS["mobilellama-1.4b"], parse_policy("w4+kv8"), Workload(16, 3, 1))
    path = write_trace(trace, tmp_path / "t.parquet")
    table = pq.read_table(path)
    module = table.column("module").combine_chunks()
    names = ["zz-unused", *reversed(module.dictionary.to_pylist())]
    codes = pa.array([None if c is None else names.index(module.dictionary[c].as_py())
                      for c in module.indices.to_pylist()], type=pa.int8())
    shuffled = table.set_column(table.schema.get_field_index("module"), "module",
                                pa.DictionaryArray.from_arrays(codes, pa.array(names)))
    pq.write_table(shuffled, tmp_path / "s.parquet")
    fast = [read_trace(tmp_path / name).rows for name in ("t.parquet", "s.parquet")]
    monkeypatch.setattr(io, "_stored_columns", lambda file: None)
    slow = [read_trace(tmp_path / name).rows for name in ("t.parquet", "s.parquet")]
    for got in (*fast, *slow):
        pd.testing.assert_frame_equal(got, trace.rows)
