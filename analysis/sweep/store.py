"""A sweep's folder: one small Parquet file per finished point, a computation log, the merged table.

    DIR/spec.yaml          the spec this folder was last run with (provenance)
    DIR/points/<key>.parquet   one row, written to a temporary name and renamed (atomic on POSIX),
                           so a point file is either whole or absent, whatever kills the writer; it
                           carries its key and a checksum of key and row (Parquet metadata), so a
                           file copied over another or edited is found, discarded and recomputed
    DIR/computed.log       one line per point computation (key, names, wall seconds, pid)
    DIR/results.parquet    the merged table of the spec's points, with speedups over fp16

A point whose file exists is finished and is never recomputed. One sweep at a time may use a folder:
an advisory lock (DIR/.lock, released by the OS when its holder dies; sweep/lock.py) turns a second one
away, and one left by a sweep that is gone is taken over.
Workers write their own point files, so a Dask cluster must share DIR with the client.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.analysis.sweep.lock import acquire, release
from mpsim.errors import MpsimInputError, warn
from mpsim.traces.atomic import reason, write_parquet_atomic
from mpsim.traces.errors import OutputError

# The group a point's speedup is measured within: same model, engine, hardware, perf model and
# workload (an engine's w4 over that engine's own fp16).
BASELINE_POLICY = "fp16"
SPEEDUP_KEYS = ["model", "engine", "tp", "pp", "micro_batches", "hw", "perf_model", "prompt_len", "gen_len",
                "batch"]
SEAL = b"mpsim.point"  # Parquet metadata: {"key": the point's key, "sum": point_checksum}


class PointStore:
    def __init__(self, root: str | Path, points: str = "points") -> None:
        self.root = Path(root)
        self.points = self.root / points  # "serve_points" for a spec's serve section
        self.log = self.root / "computed.log"
        self.results = self.root / "results.parquet"
        self.lock = self.root / ".lock"

    def point_path(self, key: str) -> Path:
        return self.points / f"{key}.parquet"

    @contextmanager
    def locked(self) -> Iterator[int]:
        """Hold the folder for one sweep (a second sweep on it is an error, not a race); yields the
        lock's descriptor, which worker processes close (sweep/lock.py)."""
        lock_path = self.lock
        try:
            self.points.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise OutputError(self.root, reason(exc, self.points)) from None
        try:
            warn(acquire(fd, self.root, lock_path))
            try:
                yield fd
            finally:
                release(fd)
        finally:
            os.close(fd)

    def finished(self) -> set[str]:
        """Keys of the points whose files exist (temporary files of killed writers are not points)."""
        if not self.points.is_dir():
            return set()
        return {p.stem for p in self.points.glob("*.parquet") if not p.name.startswith(".")}

    def remove_partial(self) -> int:
        """Delete temporary files a killed writer left behind; how many there were."""
        stale = list(self.points.glob(".*.tmp")) if self.points.is_dir() else []
        for p in stale:
            p.unlink()
        return len(stale)

    def write_point(self, key: str, row: dict[str, Any]) -> Path:
        path = self.point_path(key)
        table = pa.Table.from_pandas(pd.DataFrame([row]), preserve_index=False)
        seal = json.dumps({"key": key, "sum": point_checksum(key, table)}).encode()
        write_parquet_atomic(table.replace_schema_metadata({**(table.schema.metadata or {}), SEAL: seal}),
                             path)
        return path

    def log_computed(self, key: str, label: str, seconds: float) -> None:
        # One write() of a short line on an O_APPEND file: lines of concurrent workers do not mix.
        line = f"{key}\t{label}\t{seconds:.4f}\t{os.getpid()}\n".encode()
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            raise OutputError(self.log, reason(exc, self.log)) from None

    def computed_keys(self) -> list[str]:
        """Keys in the computation log, one per computation (a key twice = computed twice)."""
        if not self.log.exists():
            return []
        return [line.split("\t", 1)[0] for line in self.log.read_text().splitlines() if line]

    def read_points(self, keys: list[str]) -> pd.DataFrame:
        """The rows of `keys`, in that order; a missing point is an error naming it. Point files that
        are unreadable or fail their seal (another point's file, an edited one) are deleted with a
        warning and reported by DiscardedPointsError: the sweep computes them again."""
        missing = [k for k in keys if not self.point_path(k).exists()]
        if missing:
            raise MpsimInputError(
                f"{self.points}: {len(missing)} point(s) have no file (first: {missing[0]}); with "
                "--dask the workers must see the same folder as the client")
        frames, bad = [], []
        for k in keys:
            table, why = self._read_point(k)
            if table is None:
                warn(f"{self.point_path(k)}: {why}; discarded, the point is computed again")
                self.point_path(k).unlink(missing_ok=True)
                bad.append(k)
            else:
                frames.append(table.to_pandas())
        if bad:
            raise DiscardedPointsError(bad)
        return pd.concat(frames, ignore_index=True)

    def _read_point(self, key: str) -> tuple[pa.Table | None, str]:
        try:
            table = pq.read_table(self.point_path(key))
        except (pa.ArrowInvalid, OSError) as exc:
            return None, f"unreadable point file ({exc})"
        try:
            seal = json.loads((table.schema.metadata or {})[SEAL])
        except (KeyError, ValueError):
            return None, "no seal (not a point file mpsim wrote)"
        if not isinstance(seal, dict) or seal.get("key") != key:
            return None, f"the file of another point ({seal.get('key') if isinstance(seal, dict) else seal})"
        if seal.get("sum") != point_checksum(key, table):
            return None, "its content does not match its checksum (edited or damaged)"
        return table, ""

    def merge(self, keys: list[str]) -> pd.DataFrame:
        """Write DIR/results.parquet from the points of `keys` (in that order) and return it."""
        table = with_speedups(self.read_points(keys))
        write_parquet_atomic(pa.Table.from_pandas(table, preserve_index=False), self.results)
        return table


class DiscardedPointsError(MpsimInputError):
    """Point files that were discarded while reading (the caller computes them again)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(f"{len(keys)} point file(s) discarded (first: {keys[0]})")
        self.keys = keys


def point_checksum(key: str, table: pa.Table) -> str:
    """A hash of a point's key and row (column names, types and values)."""
    cols = [[f.name, str(f.type), table.column(f.name).to_pylist()] for f in table.schema]
    text = json.dumps([key, cols], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def with_speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Add speedup_vs_fp16: tokens/s over the fp16 point of the same model, engine, parallel plan, hw,
    perf model, workload.

    NaN where the sweep has no fp16 point to compare with.
    """
    table = table.copy()
    base = table[table["policy"] == BASELINE_POLICY].set_index(SPEEDUP_KEYS)["tokens_per_s"]
    index = pd.MultiIndex.from_frame(table[SPEEDUP_KEYS])
    table["speedup_vs_fp16"] = table["tokens_per_s"].to_numpy() / base.reindex(index).to_numpy()
    return table
