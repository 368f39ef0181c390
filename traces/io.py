"""Parquet read/write of traces. The file's schema metadata carries TraceMeta as JSON under b"mpsim".

Writes are atomic (temporary file in the same folder, then rename); reads validate before returning.
Columns are stored in their storage types (schema.STORAGE: narrow integers, dictionary-encoded text),
and a read converts the Arrow table column by column, releasing each as it goes, so a trace is held
once in memory, not twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.traces.atomic import write_parquet_atomic
from mpsim.traces.errors import TraceError
from mpsim.traces.schema import SCHEMA_VERSION
from mpsim.traces.trace import SOURCES, Trace, TraceMeta
from mpsim.traces.validate import validate_frame

META_KEY = b"mpsim"


def write_trace(trace: Trace, path: str | Path) -> Path:
    path = Path(path)
    frame = validate_frame(trace.rows, f"trace for {path}")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[META_KEY] = json.dumps(trace.meta.as_dict(), sort_keys=True).encode()
    return write_parquet_atomic(table.replace_schema_metadata(meta), path)


def read_trace(path: str | Path) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    meta = _read_meta(table.schema.metadata or {}, path)
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    del table  # self_destruct: the Arrow buffers went to pandas column by column
    return Trace(validate_frame(frame, str(path)), meta)


def _read_meta(raw: dict[bytes, bytes], path: Path) -> TraceMeta:
    if META_KEY not in raw:
        raise TraceError(f"{path}: no mpsim metadata in the Parquet schema (not an mpsim trace?)")
    try:
        meta = json.loads(raw[META_KEY])
    except ValueError as exc:
        raise TraceError(f"{path}: mpsim metadata is not JSON ({exc})") from None
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TraceError(
            f"{path}: trace schema_version {version!r}; this mpsim reads version {SCHEMA_VERSION}"
        )
    if meta.get("source") not in SOURCES:
        raise TraceError(f"{path}: metadata 'source' is {meta.get('source')!r}; expected one of {SOURCES}")
    return TraceMeta(
        source=meta["source"], model=dict(meta.get("model") or {}),
        policy=str(meta.get("policy") or ""), workload=dict(meta.get("workload") or {}),
        environment=dict(meta.get("environment") or {}), schema_version=version,
    )
