"""A trace: the launch table plus the run's metadata (model, policy, workload, environment)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mpsim.traces.errors import TraceError
from mpsim.traces.meta import SOURCES, TraceMeta
from mpsim.traces.schema import COLUMNS, REQUIRED
from mpsim.traces.validate import coerce_types

__all__ = ["SOURCES", "Trace", "TraceMeta", "rows_to_frame"]


@dataclass
class Trace:
    rows: pd.DataFrame
    meta: TraceMeta

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], meta: TraceMeta) -> Trace:
        return cls(rows_to_frame(rows), meta)

    def __len__(self) -> int:
        return len(self.rows)


def rows_to_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The canonical typed DataFrame (COLUMNS order, STORAGE dtypes) of launch rows given as mappings.

    A key that is not a trace column, or a missing required one, is a TraceError naming the launch
    (the guard a typo in a launcher's recorded fields would otherwise slip past). A row that names
    no parallel plan runs on one GPU in one stage (tp 1, stage 0) in micro-batch 0: what every row
    before schema 5 was.
    """
    rows = [{"tp": 1, "stage": 0, "micro_batch": 0, **r} for r in rows]
    for i, r in enumerate(rows):
        unknown = sorted(set(r) - set(COLUMNS))
        missing = [c for c in REQUIRED if c not in r]
        if unknown or missing:
            raise TraceError(f"launch row {i}: unknown columns {unknown}, missing required {missing}")
    frame = pd.DataFrame.from_records(rows).reindex(columns=list(COLUMNS))
    return coerce_types(frame, "launch rows")
