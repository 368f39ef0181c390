"""What a simulation returns: per-launch outcomes, the per-launch table, and the run summary.

`LaunchOutcome` is one simulated launch (what the memo stores). `SimResult.launches` is a DataFrame
aligned with the trace rows (same index, same order) holding LAUNCH_COLUMNS, built when first read
(`SimResult.column` gives one column without it); `SimResult.summary` is the RunSummary every model
reports (mpsim.sim.summary). `busy_start_s`/`busy_end_s` are the launch's overlapped busy interval
(equal to `start_s`/`end_s` where launches do not overlap); `energy_j` its energy, static power over
`time_s` included (mpsim/sim/energy.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: the SimPy models import this module without loading pandas
    import pandas as pd

    from mpsim.sim.summary import RunSummary

# Utilization columns: GPU units (dram, l2, tensor, cuda) and NPU units (dram, dma, decoder, mac,
# vector, sram); a unit the device does not have is NaN. `tensor_fp8`: the share of the cycles the
# tensor pipe runs fp8 MMAs (part of `tensor`; the power model prices those cycles apart).
UNITS = ("dram", "l2", "tensor", "cuda", "dma", "decoder", "mac", "vector", "sram", "tensor_fp8")
# The named parts of a launch's time (they add up to `time_s`): what a model's outcome carries
# (BODY_PARTS, in seconds), then `latency` (the rest of the kernel) and `launch` (`overhead_s`).
# `comm`: a collective's time on the links (mpsim/sim/comm.py), the whole time of a collective row.
PARTS = ("memory", "math", "issue", "comm", "latency", "fixed", "launch")
BODY_PARTS = ("memory", "math", "issue", "comm", "fixed")
PART_COLUMNS = tuple(f"part_{p}_s" for p in PARTS)
LAUNCH_COLUMNS = (
    "launch_id", "start_s", "end_s", "time_s", "kernel_s", "overhead_s", "cycles",
    "bytes_dram", "bytes_l2", "bytes_sram", *(f"util_{u}" for u in UNITS), "bound",
    "t_math_s", "t_mem_s", "t_lower_s", "ctas_per_sm", "waves",
    "busy_start_s", "busy_end_s", "energy_j", *PART_COLUMNS,
)


@dataclass(frozen=True)
class LaunchOutcome:
    """One simulated launch. `cycles` counts the kernel body; `overhead_s` is the launch cost."""

    cycles: float
    clock_hz: float
    overhead_s: float
    bytes_dram: float
    bytes_l2: float = math.nan
    bytes_sram: float = math.nan
    util: dict[str, float] = field(default_factory=dict)
    bound: str = "latency"
    ctas_per_sm: float = math.nan
    waves: float = math.nan
    parts: dict[str, float] = field(default_factory=dict)  # BODY_PARTS in seconds (missing: 0)

    @property
    def kernel_s(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def time_s(self) -> float:
        return self.overhead_s + self.kernel_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchOutcome:
        return cls(**{**d, "util": dict(d.get("util") or {}), "parts": dict(d.get("parts") or {})})


def latency_part(time_s: Any, body: Sequence[Any], launch: Any) -> Any:
    """The `latency` part: what the BODY_PARTS (`body`, in that order) and the `launch` part leave of
    `time_s`, at least 0 (they never exceed it but for float rounding, so the parts add up to
    `time_s` to ~1e-16 relative). Floats or arrays alike, one order of subtraction everywhere, so
    every path gives the same number."""
    rest = time_s
    for part in body:
        rest = rest - part
    rest = rest - launch
    # + 0.0 turns a clipped -0.0 into 0.0
    return (max(rest, 0.0) if isinstance(rest, float) else rest.clip(min=0.0)) + 0.0


def pick_bound(busy: dict[str, float], kernel_s: float, overhead_s: float) -> str:
    """The bounding resource: the busiest unit when it is busy at least half the kernel body,
    else 'latency' (nothing saturated: fill, drain and dependent waits); 'launch' when the fixed
    launch cost exceeds the whole kernel body."""
    if overhead_s > kernel_s:
        return "launch"
    unit, frac = max(busy.items(), key=lambda kv: (kv[1], kv[0])) if busy else ("latency", 0.0)
    return unit if frac >= 0.5 else "latency"


class LaunchColumns(Protocol):
    """A run's per-launch results (mpsim.sim.replay.LaunchTable): one column as a Series aligned
    with the trace rows, or the whole table, built on demand."""

    def __getitem__(self, name: str) -> pd.Series: ...

    def frame(self) -> pd.DataFrame: ...


@dataclass
class SimResult:
    """A replayed trace: per-launch table aligned with the trace rows, run summary and run facts.

    `launches` (the LAUNCH_COLUMNS DataFrame, ~200 bytes a launch) is built the first time it is
    read; `column(name)` gives one column without it.
    """

    table: LaunchColumns
    summary: RunSummary
    model: str
    hw_name: str
    stats: dict[str, Any] = field(default_factory=dict)
    protocol: str | None = None  # the measurement protocol the times follow; None: none applies

    @cached_property
    def launches(self) -> pd.DataFrame:
        return self.table.frame()

    def column(self, name: str) -> pd.Series:
        """One of LAUNCH_COLUMNS, aligned with the trace rows, without building the whole table."""
        if "launches" in self.__dict__:
            return self.launches[name]
        return self.table[name]

    @property
    def time_s(self) -> pd.Series:
        return self.column("time_s")
