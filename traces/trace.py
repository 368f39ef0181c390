"""A trace: the launch table plus the run's metadata (model, policy, workload, environment)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from mpsim.traces.errors import TraceError
from mpsim.traces.schema import COLUMNS, PROTOCOLS, REQUIRED, SCHEMA_VERSION
from mpsim.traces.validate import coerce_types

SOURCES = ("synth", "capture", "kineto")


@dataclass(frozen=True)
class TraceMeta:
    """What the trace is of. Model and workload are plain dicts: traces/ knows no model or policy.

    `protocol`: how the rows' measured_us were timed (one of PROTOCOLS), None when the trace has no
    measured times or does not say.
    """

    source: str
    model: dict[str, Any] = field(default_factory=dict)
    policy: str = ""
    workload: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    protocol: str | None = None

    def __post_init__(self) -> None:
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise TraceError(f"trace protocol {self.protocol!r}: expected one of {list(PROTOCOLS)}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "source": self.source, "model": self.model,
            "policy": self.policy, "workload": self.workload, "environment": self.environment,
            "protocol": self.protocol,
        }


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
    (the guard a typo in a launcher's recorded fields would otherwise slip past).
    """
    rows = list(rows)
    for i, r in enumerate(rows):
        unknown = sorted(set(r) - set(COLUMNS))
        missing = [c for c in REQUIRED if c not in r]
        if unknown or missing:
            raise TraceError(f"launch row {i}: unknown columns {unknown}, missing required {missing}")
    frame = pd.DataFrame.from_records(rows).reindex(columns=list(COLUMNS))
    return coerce_types(frame, "launch rows")
