"""The one atomic file writer: readers see the old file or the whole new one, never a part.

Every file mpsim writes that a reader may open while it is being written (traces, sweep points and
tables, the simulator's memo, timelines, per-launch results) goes through `atomic_write`: the writer
fills a temporary file in the same folder, which then replaces the target with `os.replace`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> Path:
    """Call `write(tmp_path)` on a temporary file beside `path`, then move it onto `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_parquet_atomic(table: pa.Table, path: str | Path, **options: Any) -> Path:
    """`table` as Parquet at `path`; `options` go to pyarrow.parquet.write_table."""
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp, **options))


def write_json_atomic(obj: object, path: str | Path) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(obj, fh)

    return atomic_write(path, write)


def write_text_atomic(text: str, path: str | Path) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
