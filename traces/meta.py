"""What a trace is of (TraceMeta): model, policy, workload, environment; no pandas, no launch rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from mpsim.traces.errors import TraceError
from mpsim.traces.schema import DEFAULT_ENGINE, PROTOCOLS, SCHEMA_VERSION

SOURCES = ("synth", "capture", "kineto")


@cache
def known_engines() -> tuple[str, ...]:
    """The engines a trace may name: the shipped engine files (mpsim/data/engines/<name>.yaml)."""
    folder = resources.files("mpsim").joinpath("data", "engines")
    return tuple(sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")))


@dataclass(frozen=True)
class TraceMeta:
    """What the trace is of. Model and workload are plain dicts: traces/ knows no model or policy.

    `protocol`: how the rows' measured_us were timed (one of PROTOCOLS), None when the trace has no
    measured times or does not say. `engine`: the stack whose kernels the rows are (schema 4; one
    of known_engines(); "mpsim" for what capture records and for every file before version 4).
    """

    source: str
    model: dict[str, Any] = field(default_factory=dict)
    policy: str = ""
    workload: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    protocol: str | None = None
    engine: str = DEFAULT_ENGINE

    def __post_init__(self) -> None:
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise TraceError(f"trace protocol {self.protocol!r}: expected one of {list(PROTOCOLS)}")
        if self.engine not in known_engines():
            raise TraceError(f"trace engine {self.engine!r}: expected one of {list(known_engines())}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "source": self.source, "model": self.model,
            "policy": self.policy, "workload": self.workload, "environment": self.environment,
            "protocol": self.protocol, "engine": self.engine,
        }
