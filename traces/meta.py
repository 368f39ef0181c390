"""What a trace is of (TraceMeta): model, policy, workload, environment; no pandas, no launch rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpsim.traces.errors import TraceError
from mpsim.traces.schema import PROTOCOLS, SCHEMA_VERSION

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
