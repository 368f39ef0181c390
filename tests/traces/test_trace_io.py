"""Trace contract: Parquet round trip, metadata, validation errors that name file/row/column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.chrome import chrome_events
from mpsim.traces.errors import TraceError
from mpsim.traces.io import META_KEY, read_trace, write_trace
from mpsim.traces.schema import COLUMNS, SCHEMA_VERSION
from mpsim.traces.trace import Trace, TraceMeta, rows_to_frame
from mpsim.workload import Workload


@pytest.fixture(scope="module")
def small_trace() -> Trace:
    return synthesize(PRESETS["mobilellama-1.4b"], parse_policy("ap4-4@2-3+kv8"), Workload(16, 5, 2))


def _write_frame(frame: pd.DataFrame, path: Path, meta: dict[str, object] | None = None) -> Path:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = meta or {"schema_version": 1, "source": "synth"}
    table = table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    pq.write_table(table, path)
    return path


def test_rows_with_unknown_or_missing_columns_name_the_launch() -> None:
    good = small_trace_row()
    assert list(rows_to_frame([good]).columns) == list(COLUMNS)
    with pytest.raises(TraceError, match=r"launch row 1: unknown columns \['kv_lenn'\]"):
        rows_to_frame([good, {**good, "kv_lenn": 3}])
    with pytest.raises(TraceError, match=r"missing required \['config'\]"):
        rows_to_frame([{k: v for k, v in good.items() if k != "config"}])


def small_trace_row() -> dict[str, object]:
    return {"launch_id": 0, "stream": 0, "kernel": "k", "op": "norm", "phase": "decode", "step": 1,
            "layer": 0, "module": "attn_norm", "m": 1, "n": 8, "grid": "[1]", "config": "{}",
            "flops": 8, "bytes_read": 16, "bytes_written": 16}


def test_round_trip_keeps_rows_and_metadata(small_trace: Trace, tmp_path: Path) -> None:
    path = write_trace(small_trace, tmp_path / "t.parquet")
    back = read_trace(path)
    pd.testing.assert_frame_equal(back.rows, small_trace.rows)
    assert back.meta == small_trace.meta
    assert back.meta.policy == "ap4-4@2-3+kv8"
    assert back.meta.workload == {"prompt_len": 16, "gen_len": 5, "batch": 2}
    assert back.meta.model["hidden"] == 2048


def test_write_is_atomic_no_temp_left(small_trace: Trace, tmp_path: Path) -> None:
    write_trace(small_trace, tmp_path / "t.parquet")
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_truncated_file_names_the_file(small_trace: Trace, tmp_path: Path) -> None:
    path = write_trace(small_trace, tmp_path / "t.parquet")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"t\.parquet: not a readable Parquet file"):
        read_trace(path)


def test_missing_column(small_trace: Trace, tmp_path: Path) -> None:
    path = _write_frame(small_trace.rows.drop(columns=["kv_len"]), tmp_path / "m.parquet")
    with pytest.raises(TraceError, match=r"m\.parquet: missing column\(s\) \['kv_len'\]"):
        read_trace(path)


def test_extra_column(small_trace: Trace, tmp_path: Path) -> None:
    path = _write_frame(small_trace.rows.assign(color="red"), tmp_path / "x.parquet")
    with pytest.raises(TraceError, match=r"unexpected column\(s\) \['color'\]"):
        read_trace(path)


def test_negative_dimension_names_row_and_column(small_trace: Trace, tmp_path: Path) -> None:
    frame = small_trace.rows.copy()
    frame.loc[7, "n"] = -4096
    path = _write_frame(frame, tmp_path / "neg.parquet")
    with pytest.raises(TraceError, match=r"neg\.parquet: row 7, column 'n': must be >= 0, got -4096"):
        read_trace(path)


@pytest.mark.parametrize(("column", "value", "pattern"), [
    ("op", "conv", r"column 'op': unknown value 'conv'"),
    ("w_format", "int5-group", r"column 'w_format': unknown value 'int5-group'"),
    ("k_bits", 5, r"column 'k_bits': unknown value 5"),
    ("phase", "warmup", r"column 'phase': unknown value 'warmup'"),
    ("config", "{oops", r"column 'config': not JSON text"),
])
def test_bad_values_are_named(small_trace: Trace, tmp_path: Path, column: str, value: object,
                              pattern: str) -> None:
    frame = small_trace.rows.copy()
    row = int(frame.index[frame[column].notna()][3])
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    path = _write_frame(frame, tmp_path / "bad.parquet")
    with pytest.raises(TraceError, match=rf"row {row}, {pattern}"):
        read_trace(path)


def test_wrong_type_names_column(small_trace: Trace, tmp_path: Path) -> None:
    frame = small_trace.rows.copy()
    frame["m"] = [None if v is pd.NA else str(v) for v in frame["m"]]
    frame.loc[2, "m"] = "many"
    path = _write_frame(frame, tmp_path / "type.parquet")
    with pytest.raises(TraceError, match=r"row 2, column 'm': expected Int64"):
        read_trace(path)


def test_required_by_op(small_trace: Trace, tmp_path: Path) -> None:
    frame = small_trace.rows.copy()
    row = int(frame.index[frame["op"] == "gemm"][0])
    frame.loc[row, "w_format"] = pd.NA
    path = _write_frame(frame, tmp_path / "req.parquet")
    message = rf"row {row}, column 'w_format': is empty but required for op 'gemm'"
    with pytest.raises(TraceError, match=message):
        read_trace(path)


def test_wrong_schema_version(small_trace: Trace, tmp_path: Path) -> None:
    path = _write_frame(small_trace.rows, tmp_path / "v.parquet", {"schema_version": 99, "source": "synth"})
    with pytest.raises(TraceError, match="schema_version 99"):
        read_trace(path)


def test_not_an_mpsim_trace(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(TraceError, match="no mpsim metadata"):
        read_trace(path)


def test_chrome_export_has_one_event_per_launch(small_trace: Trace) -> None:
    rows = small_trace.rows
    dur = [1.0 + i % 3 for i in range(len(rows))]
    starts = [sum(dur[:i]) for i in range(len(dur))]  # back to back on one stream
    doc = chrome_events(rows, starts, dur, "test")
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]  # type: ignore[index, union-attr]
    assert len(events) == len(rows)
    assert events[1]["ts"] == pytest.approx(dur[0])
    assert events[0]["args"]["op"] == rows["op"].iloc[0]
    json.dumps(doc)  # serializable as Perfetto reads it


def test_protocol_round_trips_and_old_files_stay_readable(small_trace: Trace, tmp_path: Path) -> None:
    from dataclasses import replace

    graph = Trace(small_trace.rows, replace(small_trace.meta, protocol="graph"))
    assert read_trace(write_trace(graph, tmp_path / "g.parquet")).meta.protocol == "graph"
    # A version-1 file (no protocol field) still reads; a capture's environment may name the protocol.
    # Versions 1 and 2 (no protocol field) still read, upgraded to this version.
    for version in (1, 2):
        old = _write_frame(small_trace.rows, tmp_path / f"v{version}.parquet",
                           {"schema_version": version, "source": "capture",
                            "environment": {"protocol": "kernel"}})
        back = read_trace(old)
        assert back.meta.schema_version == SCHEMA_VERSION == 6 and back.meta.protocol == "kernel"
        assert read_trace(write_trace(back, tmp_path / "v4.parquet")).meta.protocol == "kernel"
    plain = _write_frame(small_trace.rows, tmp_path / "p.parquet", {"schema_version": 2, "source": "synth"})
    assert read_trace(plain).meta.protocol is None


def test_engine_round_trips_and_files_before_version_4_read_as_mpsim(small_trace: Trace,
                                                                     tmp_path: Path) -> None:
    """Schema 4: the metadata names the engine; a version-3 file (no engine field) ran mpsim's kernels."""
    from dataclasses import replace

    assert small_trace.meta.engine == "mpsim"
    trt = Trace(small_trace.rows, replace(small_trace.meta, engine="trtllm"))
    path = write_trace(trt, tmp_path / "t.parquet")
    assert json.loads(pq.ParquetFile(path).schema_arrow.metadata[META_KEY])["engine"] == "trtllm"
    assert read_trace(path).meta.engine == "trtllm"
    old = _write_frame(small_trace.rows, tmp_path / "v3.parquet",
                       {"schema_version": 3, "source": "capture", "protocol": "kernel"})
    back = read_trace(old)
    assert (back.meta.schema_version, back.meta.engine, back.meta.protocol) == (
        SCHEMA_VERSION, "mpsim", "kernel")


@pytest.mark.parametrize(("meta", "match"), [
    ({"schema_version": 4, "engine": "tensorrt"},
     r"bad.parquet: metadata engine is 'tensorrt'; "
     r"expected one of \['mpsim', 'sglang', 'sglang-torchnative', 'trtllm', 'turbomind', 'vllm'\]"),
    ({"schema_version": 4}, r"metadata engine is None; expected one of"),
    ({"schema_version": 3, "engine": "vllm"}, r"metadata 'engine' in a version-3 file"),
])
def test_unknown_or_misplaced_engines_are_errors(small_trace: Trace, tmp_path: Path,
                                                 meta: dict[str, object], match: str) -> None:
    path = _write_frame(small_trace.rows, tmp_path / "bad.parquet", {"source": "synth", **meta})
    with pytest.raises(TraceError, match=match):
        read_trace(path)
    with pytest.raises(TraceError, match=r"trace engine 'lmdeploy': expected one of"):
        TraceMeta("synth", engine="lmdeploy")


@pytest.mark.parametrize(("meta", "match"), [
    ({"protocol": "cupti"}, r"metadata protocol is 'cupti'"),
    ({"environment": {"protocol": "Graph"}}, r"environment.protocol is 'Graph'"),
    ({"protocol": "graph", "environment": {"protocol": "eager"}}, "disagrees"),
])
def test_unknown_or_conflicting_protocols_are_errors(small_trace: Trace, tmp_path: Path,
                                                     meta: dict[str, object], match: str) -> None:
    path = _write_frame(small_trace.rows, tmp_path / "bad.parquet",
                        {"schema_version": 3, "source": "capture", **meta})
    with pytest.raises(TraceError, match=match):
        read_trace(path)
    with pytest.raises(TraceError, match="expected one of"):
        TraceMeta("capture", protocol="wall")


def test_version_1_files_stay_readable_with_kv_tokens_filled(small_trace: Trace, tmp_path: Path) -> None:
    """A schema-1 file (before kv_tokens) reads as this version: batch x kv_len for decode attention."""
    old = small_trace.rows.drop(columns=["kv_tokens"])
    trace = read_trace(_write_frame(old, tmp_path / "v1.parquet", {"schema_version": 1, "source": "synth"}))
    assert trace.meta.schema_version == SCHEMA_VERSION
    rows = trace.rows
    decode = (rows["op"] == "attention") & (rows["q_len"] == 1)
    assert decode.any()
    assert (rows.loc[decode, "kv_tokens"] == rows.loc[decode, "batch"] * rows.loc[decode, "kv_len"]).all()
    assert rows.loc[~decode, "kv_tokens"].isna().all()
    pd.testing.assert_frame_equal(rows, small_trace.rows)
