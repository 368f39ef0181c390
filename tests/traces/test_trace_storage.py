"""Traces at scale: held in narrow storage dtypes, validated by column, bad rows still named.

A ~800k-launch trace (the size of a 7B model's 2048-token generation) with one malformed config
string in row 700,001 fails naming that row, without parsing 800k JSON strings; values that do not
fit their storage type, and traces written with the contract's wide types, are handled too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.errors import TraceError
from mpsim.traces.io import META_KEY, read_trace, write_trace
from mpsim.traces.schema import COLUMNS, STORAGE
from mpsim.traces.trace import Trace
from mpsim.traces.validate import validate_frame
from mpsim.workload import Workload

BAD_ROW = 700_001


@pytest.fixture(scope="module")
def small() -> Trace:
    return synthesize(PRESETS["mobilellama-1.4b"], parse_policy("w4+kv8"), Workload(16, 4, 2))


def _big(small: Trace, rows: int = 800_000) -> pd.DataFrame:
    """`small`'s launches repeated to `rows` launches (categoricals keep their codes: cheap)."""
    index = np.arange(rows) % len(small.rows)
    return small.rows.iloc[index].reset_index(drop=True).assign(
        launch_id=pd.array(np.arange(rows), dtype="Int64"))


def _write(frame: pd.DataFrame, path: Path) -> Path:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.replace_schema_metadata(
        {META_KEY: json.dumps({"schema_version": 1, "source": "synth"}).encode()}), path)
    return path


def test_synthesized_rows_are_in_storage_dtypes(small: Trace) -> None:
    assert {c: str(t) for c, t in small.rows.dtypes.items()} == STORAGE
    for col in small.rows.select_dtypes("category"):
        cats = small.rows[col].cat.categories
        assert cats.is_monotonic_increasing and cats.dtype == "str"
        assert set(small.rows[col].dropna()) == set(cats)  # every category used


def test_malformed_config_in_row_700001_is_named(small: Trace, tmp_path: Path) -> None:
    frame = _big(small)
    frame["config"] = frame["config"].cat.add_categories(["{not json"])
    frame.loc[BAD_ROW, "config"] = "{not json"
    start = time.perf_counter()
    with pytest.raises(TraceError, match=rf"row {BAD_ROW}, column 'config': not JSON text: '\{{not json'"):
        validate_frame(frame, "big")
    assert time.perf_counter() - start < 10  # columnar: no per-row JSON parsing
    with pytest.raises(TraceError, match=rf"bad\.parquet: row {BAD_ROW}, column 'config': not JSON"):
        read_trace(_write(frame, tmp_path / "bad.parquet"))


def test_wrong_type_far_down_is_named(small: Trace) -> None:
    frame = _big(small, 300_000)
    frame["k"] = frame["k"].astype(object)
    frame.loc[BAD_ROW // 3, "k"] = "many"
    with pytest.raises(TraceError, match=rf"row {BAD_ROW // 3}, column 'k': expected Int64"):
        validate_frame(frame, "big")


def test_a_value_past_its_storage_type_is_named(small: Trace, tmp_path: Path) -> None:
    frame = small.rows.astype(COLUMNS)
    frame.loc[5, "m"] = 2**40
    with pytest.raises(TraceError, match=r"row 5, column 'm': 1099511627776 is out of the range"):
        read_trace(_write(frame, tmp_path / "wide.parquet"))


def test_wide_and_narrow_files_read_the_same(small: Trace, tmp_path: Path) -> None:
    narrow = read_trace(write_trace(small, tmp_path / "narrow.parquet")).rows
    wide = read_trace(_write(small.rows.astype(COLUMNS), tmp_path / "wide.parquet")).rows
    pd.testing.assert_frame_equal(narrow, wide)
    pd.testing.assert_frame_equal(narrow, small.rows)
    assert pq.read_schema(tmp_path / "narrow.parquet").field("kv_len").type == pa.int32()
