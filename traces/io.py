"""Parquet read/write of traces. The file's schema metadata carries TraceMeta as JSON under b"mpsim".

Files are written at SCHEMA_VERSION (6), by traces/write.py (from columns, without pandas); every
version in READABLE_VERSIONS is read and upgraded: version 1 has no `kv_tokens` column (filled on
read), versions 1 and 2 no `protocol` field (it comes from a capture's environment["protocol"] when
that names one), versions 1 to 3 no `engine` field (they read as "mpsim", whose kernels they ran),
versions 1 to 4 no parallel-plan columns (`with_parallel_columns`: tp 1, stage 0, no collectives) and no
`kv_format` column (`with_kv_format`: from k_bits, fp16, int8, int4, on attention and KV-write rows;
<NA> elsewhere), versions 1 to 5 no `micro_batch` column (`with_micro_batch`: 0, one batch).

Writes are atomic (temporary file in the same folder, then rename); reads validate before returning.
Columns are stored in their storage types (schema.STORAGE: narrow integers, dictionary-encoded text),
and a file that holds them so (what mpsim writes) is read as it is: the DataFrame's columns lie over
Arrow's memory (traces/columns.py: from_arrow), no conversion, the trace held once. Any other file
(wide types, plain text, a version-1 file) goes through pandas a few columns at a time, handing
their Arrow memory back before the next, and is coerced to the storage types (validate_frame).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.traces.checks import check_values
from mpsim.traces.columns import TraceColumns, from_arrow, from_frame, to_frame
from mpsim.traces.errors import TraceError
from mpsim.traces.meta import known_engines
from mpsim.traces.schema import (
    COLUMNS,
    DEFAULT_ENGINE,
    KV_FORMAT_OF_BITS,
    PROTOCOLS,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
)
from mpsim.traces.trace import SOURCES, Trace, TraceMeta
from mpsim.traces.validate import typed_frame, validate_frame
from mpsim.traces.write import META_KEY, write_columns

__all__ = ["META_KEY", "read_trace", "with_kv_format", "with_kv_tokens", "with_micro_batch",
           "with_parallel_columns",
           "write_trace"]


def write_trace(trace: Trace, path: str | Path) -> Path:
    """`trace` as a trace file: its rows coerced to the storage types, then traces/write.py."""
    path = Path(path)
    return write_columns(from_frame(typed_frame(trace.rows, f"trace for {path}")), trace.meta, path)


def read_trace(path: str | Path) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    try:
        file = pq.ParquetFile(path)
        meta = _read_meta(file.schema_arrow.metadata or {}, path)
        stored = _stored_columns(file) if meta.schema_version != 1 else None
        frame = _read_columns(file) if stored is None else None
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    version = meta.schema_version
    if version != SCHEMA_VERSION:  # older files are upgraded (the protocol: _protocol)
        meta = dataclasses.replace(meta, schema_version=SCHEMA_VERSION)
    if stored is not None:  # every column as mpsim writes it: checked and wrapped, not converted
        check_values(stored, str(path))
        return Trace(to_frame(stored), meta)
    assert frame is not None
    if version == 1:  # before kv_tokens: every batch was uniform
        frame = with_kv_tokens(frame)
    if version < 5:  # before parallel plans (one GPU, one stage) and kv_format (int caches, from k_bits)
        frame = with_kv_format(with_parallel_columns(frame))
    if version < 6:  # before pipeline micro-batches: every launch in micro-batch 0
        frame = with_micro_batch(frame)
    return Trace(validate_frame(frame, str(path)), meta)


def with_kv_tokens(frame: pd.DataFrame) -> pd.DataFrame:
    """A version-1 launch table with the version-2 `kv_tokens` column: batch x kv_len for decode
    attention (q_len 1), <NA> elsewhere."""
    if "kv_tokens" in frame.columns:
        return frame
    decode = ((frame["op"] == "attention") & (frame["q_len"] == 1)).fillna(False).to_numpy(dtype=bool)
    tokens = pd.array([pd.NA] * len(frame), dtype="Int64")
    tokens[decode] = (frame["batch"].astype("Int64") * frame["kv_len"].astype("Int64")).to_numpy()[decode]
    return frame.assign(kv_tokens=tokens)


def with_parallel_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A launch table from before version 5 with its parallel-plan columns: every launch on one
    GPU (tp 1) in one stage (stage 0), no collective message or library."""
    n = len(frame)
    added = {"tp": pd.array([1] * n, dtype="Int64"), "stage": pd.array([0] * n, dtype="Int64"),
             "msg_bytes": pd.array([pd.NA] * n, dtype="Int64"),
             "comm_library": pd.array([pd.NA] * n, dtype="string")}
    return frame.assign(**{c: v for c, v in added.items() if c not in frame.columns})


def with_micro_batch(frame: pd.DataFrame) -> pd.DataFrame:
    """A launch table from before version 6 with its `micro_batch` column: 0 (the batch unsplit)."""
    if "micro_batch" in frame.columns:
        return frame
    return frame.assign(micro_batch=pd.array([0] * len(frame), dtype="Int64"))


def with_kv_format(frame: pd.DataFrame) -> pd.DataFrame:
    """A launch table before version 5 with the `kv_format` column: KV_FORMAT_OF_BITS of k_bits on
    attention and KV-write rows, <NA> elsewhere."""
    if "kv_format" in frame.columns:
        return frame
    kv_rows = frame["op"].isin(["attention", "kv_quant"]).fillna(False).to_numpy(dtype=bool)
    bits = frame["k_bits"].astype("Int64")
    names = pd.array([pd.NA] * len(frame), dtype="string")
    for b, name in KV_FORMAT_OF_BITS.items():
        names[kv_rows & (bits == b).fillna(False).to_numpy(dtype=bool)] = name
    return frame.assign(kv_format=names)


def _stored_columns(file: pq.ParquetFile) -> TraceColumns | None:
    """The trace's columns over the file's Arrow memory when the file holds exactly the schema's
    columns, each in its storage type (the files mpsim writes); else None, and the file is read
    through pandas and coerced (`_read_columns`, validate_frame), which names what is wrong."""
    if sorted(file.schema_arrow.names) != sorted(COLUMNS):
        return None
    table = file.read(columns=list(COLUMNS), use_threads=True)
    pa.default_memory_pool().release_unused()  # the decoder's scratch memory, else kept by the pool
    columns: TraceColumns = {}
    for col in COLUMNS:
        column = from_arrow(col, table.column(col))
        if column is None:
            return None
        columns[col] = column
    return columns


READ_BATCH = 6  # columns decoded together (in parallel): a third faster than one by one, ~15 MB more


def _read_columns(file: pq.ParquetFile) -> pd.DataFrame:
    """The file's columns (not a stored index) as a DataFrame, read a few at a time: each batch's
    Arrow buffers go back to the pool before the next is read, so the trace is not held twice."""
    pool = pa.default_memory_pool()
    index = {c for c in (file.schema_arrow.pandas_metadata or {}).get("index_columns", [])
             if isinstance(c, str)}
    names = [n for n in file.schema_arrow.names if n not in index]
    columns = {}
    for i in range(0, len(names), READ_BATCH):
        table = file.read(columns=names[i:i + READ_BATCH], use_threads=True)
        part = table.to_pandas(split_blocks=True, self_destruct=True)
        del table
        columns.update({c: part[c] for c in part.columns})
        del part
        pool.release_unused()
    return pd.DataFrame(columns, copy=False)


def _read_meta(raw: dict[bytes, bytes], path: Path) -> TraceMeta:
    if META_KEY not in raw:
        raise TraceError(f"{path}: no mpsim metadata in the Parquet schema (not an mpsim trace?)")
    try:
        meta = json.loads(raw[META_KEY])
    except ValueError as exc:
        raise TraceError(f"{path}: mpsim metadata is not JSON ({exc})") from None
    version = meta.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise TraceError(f"{path}: trace schema_version {version!r}; this mpsim reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}")
    if meta.get("source") not in SOURCES:
        raise TraceError(f"{path}: metadata 'source' is {meta.get('source')!r}; expected one of {SOURCES}")
    environment = dict(meta.get("environment") or {})
    return TraceMeta(
        source=meta["source"], model=dict(meta.get("model") or {}),
        policy=str(meta.get("policy") or ""), workload=dict(meta.get("workload") or {}),
        environment=environment, schema_version=version,
        protocol=_protocol(meta.get("protocol"), environment.get("protocol"), path),
        engine=_engine(meta, version, path),
    )


def _engine(meta: dict[str, object], version: int, path: Path) -> str:
    """The trace's engine: metadata `engine` (version 4 on, required), "mpsim" before version 4."""
    if version < 4:
        if "engine" in meta:
            raise TraceError(f"{path}: metadata 'engine' in a version-{version} file (engines came "
                             "with version 4)")
        return DEFAULT_ENGINE
    engine = meta.get("engine")
    if engine not in known_engines():
        raise TraceError(f"{path}: metadata engine is {engine!r}; expected one of {list(known_engines())}")
    return str(engine)


def _protocol(declared: object, captured: object, path: Path) -> str | None:
    """The trace's protocol: metadata `protocol` (version 3) or a capture's environment["protocol"]
    (any version); the two must agree when both are given."""
    for where, value in (("protocol", declared), ("environment.protocol", captured)):
        if value is not None and value not in PROTOCOLS:
            raise TraceError(f"{path}: metadata {where} is {value!r}; expected one of {list(PROTOCOLS)}")
    if declared is not None and captured is not None and declared != captured:
        raise TraceError(f"{path}: metadata protocol {declared!r} disagrees with "
                         f"environment.protocol {captured!r}")
    return str(declared or captured) if (declared or captured) else None
