"""The pandas-free write (traces/write.py: numpy columns straight to Arrow) gives the file pandas
gave: the same Arrow table and the same b"pandas" schema entry as pyarrow's Table.from_pandas of
the trace's DataFrame, so the file reads back the same through mpsim and through pandas."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize, synthesize_columns
from mpsim.traces.io import read_trace
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
