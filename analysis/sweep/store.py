"""A sweep's folder: one small Parquet file per finished point, a computation log, the merged table.

    DIR/spec.yaml          the spec this folder was last run with (provenance)
    DIR/points/<key>.parquet   one row, written to a temporary name and renamed (atomic on POSIX),
                           so a point file is either whole or absent, whatever kills the writer
    DIR/computed.log       one line per point computation (key, names, wall seconds, pid)
    DIR/results.parquet    the merged table of the spec's points, with speedups over fp16

A point whose file exists is finished and is never recomputed. One sweep at a time may use a folder:
an advisory lock (DIR/.lock, released by the OS when its holder dies) turns a second one away.
Workers write their own point files, so a Dask cluster must share DIR with the client.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import write_parquet_atomic

# The group a point's speedup is measured within: same model, hardware, perf model and workload.
BASELINE_POLICY = "fp16"
SPEEDUP_KEYS = ["model", "hw", "perf_model", "prompt_len", "gen_len", "batch"]


class PointStore:
    def __init__(self, root: str | Path, points: str = "points") -> None:
        self.root = Path(root)
        self.points = self.root / points  # "serve_points" for a spec's serve section
        self.log = self.root / "computed.log"
        self.results = self.root / "results.parquet"

    def point_path(self, key: str) -> Path:
        return self.points / f"{key}.parquet"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder for one sweep; a second sweep on it is an error, not a race."""
        self.points.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise MpsimInputError(f"{self.root}: another sweep is running in this folder") from None
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

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
        write_parquet_atomic(table, path)
        return path

    def log_computed(self, key: str, label: str, seconds: float) -> None:
        # One write() of a short line on an O_APPEND file: lines of concurrent workers do not mix.
        line = f"{key}\t{label}\t{seconds:.4f}\t{os.getpid()}\n".encode()
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def computed_keys(self) -> list[str]:
        """Keys in the computation log, one per computation (a key twice = computed twice)."""
        if not self.log.exists():
            return []
        return [line.split("\t", 1)[0] for line in self.log.read_text().splitlines() if line]

    def read_points(self, keys: list[str]) -> pd.DataFrame:
        """The rows of `keys`, in that order; a missing point is an error naming it."""
        missing = [k for k in keys if not self.point_path(k).exists()]
        if missing:
            raise MpsimInputError(
                f"{self.points}: {len(missing)} point(s) have no file (first: {missing[0]}); with "
                "--dask the workers must see the same folder as the client")
        frames = []
        for k in keys:
            try:
                frames.append(pq.read_table(self.point_path(k)).to_pandas())
            except (pa.ArrowInvalid, OSError) as exc:
                raise MpsimInputError(f"{self.point_path(k)}: unreadable point file ({exc}); "
                                      "delete it to recompute the point") from None
        return pd.concat(frames, ignore_index=True)

    def merge(self, keys: list[str]) -> pd.DataFrame:
        """Write DIR/results.parquet from the points of `keys` (in that order) and return it."""
        table = with_speedups(self.read_points(keys))
        write_parquet_atomic(pa.Table.from_pandas(table, preserve_index=False), self.results)
        return table


def with_speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Add speedup_vs_fp16: tokens/s over the fp16 point of the same model, hw, perf model, workload.

    NaN where the sweep has no fp16 point to compare with.
    """
    table = table.copy()
    base = table[table["policy"] == BASELINE_POLICY].set_index(SPEEDUP_KEYS)["tokens_per_s"]
    index = pd.MultiIndex.from_frame(table[SPEEDUP_KEYS])
    table["speedup_vs_fp16"] = table["tokens_per_s"].to_numpy() / base.reindex(index).to_numpy()
    return table
