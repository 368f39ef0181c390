"""Measurement protocols as data: the fixed cost each timing protocol adds to a measured call.

A measured time means different things under different protocols (traces/schema.py PROTOCOLS):
`kernel` (CUPTI kernel durations), `graph` (mean per call inside a CUDA graph), `eager` (host wall
clock around one framework call) and `trt-profiler` (TensorRT's per-layer profiler). The simulator
predicts kernel bodies; under protocol P one measured call that runs `launches` kernels costs

    sum of the kernel bodies + launches x per_launch_us + per_call_us

with the constants in mpsim/sim/protocols.yaml, each naming its source. The file also lists the op
scopes (`includes`: blank, `kv_append`, `rope+kv_append`) as the extra launches they add.

This module is the only place that computes a protocol's cost (`Protocol.cost_s`); the simulator
applies it in one place (`mpsim.sim.simulate(..., protocol=)`, `graph` by default: every launch row
one measured call), and whoever prices a call of several launches (validation's measured rows,
serving's iterations) asks `call_costs_us` / `Protocol.cost_s` here for the cost of that one call.
A GPU hardware file's optional `launch.overhead_us` (a calibration of one device) is that device's
graph gap (`for_device`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from mpsim.errors import MpsimInputError
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.traces.schema import PROTOCOLS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SCOPE_LAUNCHES = ("rope", "kv_append")
DEFAULT_PROTOCOL = "graph"  # what the simulator predicts unless told otherwise


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    per_call_us: float
    per_launch_us: float
    source: str

    def cost_us(self, launches: Any = 1) -> Any:
        """The fixed cost of one measured call that runs `launches` kernels, in microseconds (the
        one place this arithmetic lives; `launches` may be an array of calls)."""
        return self.per_call_us + launches * self.per_launch_us

    def cost_s(self, launches: Any = 1) -> Any:
        return self.cost_us(launches) * 1e-6


@dataclass(frozen=True)
class ProtocolFile:
    protocols: dict[str, Protocol]
    scopes: dict[str, tuple[str, ...]]
    sources: dict[str, dict[str, Any]]


def parse_protocols(text: str, where: str) -> ProtocolFile:
    """Read and check a protocol file: exactly the contract's four protocols, known sources."""
    try:
        data = safe_yaml(text)
    except YAMLError as exc:
        raise MpsimInputError(f"{where}: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise MpsimInputError(f"{where}: not a YAML mapping")
    sources = {str(s["id"]): dict(s) for s in data.get("sources") or []}
    raw = data.get("protocols") or {}
    if sorted(raw) != sorted(PROTOCOLS):
        raise MpsimInputError(f"{where}: protocols {sorted(raw)}; expected exactly {list(PROTOCOLS)}")
    protocols = {}
    for name, entry in raw.items():
        try:
            p = Protocol(name, str(entry["description"]), float(entry["per_call_us"]),
                         float(entry["per_launch_us"]), str(entry["source"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MpsimInputError(f"{where}: protocols.{name}: {exc!r}") from None
        if p.per_call_us < 0 or p.per_launch_us < 0:
            raise MpsimInputError(f"{where}: protocols.{name}: costs must be >= 0")
        if p.source not in sources:
            raise MpsimInputError(f"{where}: protocols.{name}: unknown source {p.source!r}")
        protocols[name] = p
    scopes = {str(k): tuple(v or ()) for k, v in (data.get("scopes") or {}).items()}
    bad = [s for s in scopes.values() for launch in s if launch not in SCOPE_LAUNCHES]
    if bad or "" not in scopes:
        raise MpsimInputError(f"{where}: scopes must include '' and list only {SCOPE_LAUNCHES}")
    return ProtocolFile(protocols, scopes, sources)


@functools.lru_cache(maxsize=1)
def shipped() -> ProtocolFile:
    text = resources.files("mpsim.sim").joinpath("protocols.yaml").read_text("utf-8")
    return parse_protocols(text, "mpsim/sim/protocols.yaml")


def get_protocol(name: str, table: ProtocolFile | None = None) -> Protocol:
    """The named protocol (shipped constants unless `table` is given); unknown names list the valid."""
    found = (table or shipped()).protocols.get(name)
    if found is None:
        raise MpsimInputError(f"unknown measurement protocol {name!r}; expected one of {list(PROTOCOLS)}")
    return found


def for_device(name: str, launch_overhead_us: float | None = None,
               table: ProtocolFile | None = None) -> Protocol:
    """The named protocol on one device: a GPU hardware file's `launch.overhead_us` (a calibration,
    None when absent) replaces the graph protocol's per-launch gap."""
    p = get_protocol(name, table)
    if p.name == "graph" and launch_overhead_us is not None:
        p = dataclasses.replace(p, per_launch_us=launch_overhead_us, source="hardware file")
    return p


def call_costs_us(names: pd.Series, launches: np.ndarray, table: ProtocolFile | None = None,
                  launch_overhead_us: float | None = None) -> np.ndarray:
    """Per measured call: the cost of its protocol (`names`) for its `launches` kernels (NaN where
    the name is missing)."""
    import numpy as np

    out = np.full(len(names), np.nan)
    values = names.astype(object).to_numpy()
    launches = np.asarray(launches, dtype=float)
    for name in {str(v) for v in values if isinstance(v, str)}:
        at = values == name
        out[at] = for_device(name, launch_overhead_us, table).cost_us(launches[at])
    return out


def scope_launches(includes: str, table: ProtocolFile | None = None) -> tuple[str, ...]:
    """The extra launches an op scope adds (`kv_append`, `rope+kv_append`; blank: none)."""
    scopes = (table or shipped()).scopes
    if includes not in scopes:
        raise MpsimInputError(f"unknown op scope {includes!r}; expected blank or one of "
                              f"{[s for s in scopes if s]}")
    return scopes[includes]


def describe(name: str | None, launch_overhead_us: float | None = None) -> str:
    """One line saying which protocol a prediction follows."""
    if name is None:
        if launch_overhead_us is not None:
            return ("protocol: none named; graph by default (each kernel pays this device's graph gap, "
                    f"the hardware file's launch.overhead_us = {launch_overhead_us:g} us)")
        gap = get_protocol("graph").per_launch_us
        return (f"protocol: none named; graph by default (each kernel pays the graph gap, {gap:g} us;"
                " mpsim/sim/protocols.yaml)")
    p = get_protocol(name)
    return (f"protocol: {name} ({p.description}; +{p.per_call_us:g} us per call, "
            f"+{p.per_launch_us:g} us per launch; mpsim/sim/protocols.yaml)")
