"""Reading what the figures draw: result tables (Parquet or CSV) and per-launch runs of a trace.

A "run" is a trace's rows with the performance model's per-launch columns beside them (start_s, end_s,
time_s, t_lower_s, bound, the overlapped busy_start_s/busy_end_s, energy_j), the one shape the
roofline, timeline and validation figures read.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim import simulate
from mpsim.sim.protocols import DEFAULT_PROTOCOL
from mpsim.traces.trace import Trace

RUN_COLUMNS = ("start_s", "end_s", "time_s", "t_lower_s", "bound", "busy_start_s", "busy_end_s",
               "energy_j")


def read_table(path: str | Path) -> pd.DataFrame:
    """A results table from Parquet or CSV; an unreadable file is one clear error."""
    path = Path(path)
    if not path.is_file():
        raise MpsimInputError(f"{path}: no such table file")
    try:
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
        return pd.read_parquet(path)
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise MpsimInputError(f"{path}: not a readable table ({exc})") from None


def trace_run(trace: Trace, hw: HardwareSpec, perf_model: str) -> pd.DataFrame:
    """The trace's rows with per-launch start/end/time/t_lower/bound under `perf_model` on `hw`, each
    launch priced under the trace's measurement protocol (the simulator's default when it names
    none), as `mpsim validate` prices it."""
    protocol = trace.meta.protocol or DEFAULT_PROTOCOL
    launches = simulate(trace, hw, perf_model, protocol=protocol).launches[list(RUN_COLUMNS)]
    return pd.concat([trace.rows.reset_index(drop=True), launches.reset_index(drop=True)], axis=1)


def run_title(trace: Trace, hw: HardwareSpec, perf_model: str) -> str:
    wl = trace.meta.workload
    model = trace.meta.model.get("name", "model?")
    return (f"{model} {trace.meta.policy or '(policy?)'} on {hw.name} ({perf_model}): prompt "
            f"{wl.get('prompt_len', '?')}, {wl.get('gen_len', '?')} new, batch {wl.get('batch', '?')}")
