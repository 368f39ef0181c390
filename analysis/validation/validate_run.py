"""The two forms of `mpsim validate`, run from parsed arguments (the command only parses them):
a captured trace (trace_form.py) or a measured table (against.py), each printed as a summary per
class and M band, with the per-row table, the summary and the scatter plot written when asked."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mpsim.analysis.validation.against import MODELS, format_unpredicted, validate_against
from mpsim.analysis.validation.constants import (
    apply_hw,
    apply_params,
    apply_protocols,
    read_calibration,
)
from mpsim.analysis.validation.metrics import format_summary
from mpsim.analysis.validation.sources import read_measurements
from mpsim.analysis.validation.trace_form import interpreter_note, validate_trace
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.protocols import describe, shipped
from mpsim.traces.atomic import write_csv_atomic
from mpsim.traces.io import read_trace


@dataclass(frozen=True)
class Outputs:
    out: str | None = None      # per-row CSV
    summary: str | None = None  # summary CSV
    plot: str | None = None     # scatter PNG


def write_outputs(o: Outputs, rows: pd.DataFrame, summary: pd.DataFrame, frame: pd.DataFrame,
                  title: str) -> None:
    if o.out:
        write_csv_atomic(rows, o.out, index=False)
        print(f"wrote {o.out} ({len(rows)} rows)")
    if o.summary:
        write_csv_atomic(summary, o.summary, index=False)
        print(f"wrote {o.summary}")
    if o.plot:
        from mpsim.analysis.plots.validation import plot_scatter  # matplotlib: only for --plot

        plot_scatter(frame[frame["status"] == "ok"], MODELS, o.plot, title)
        print(f"wrote {o.plot}")


def run_trace(trace_path: str, hw: HardwareSpec, cache_dir: str | Path | None, o: Outputs) -> None:
    trace = read_trace(trace_path)
    v = validate_trace(trace, hw, cache_dir)
    measured = int((v.frame["status"] == "ok").sum())
    print(f"validation of {Path(trace_path).name} on {hw.name}: {measured} measured launches")
    override = hw.launch_overhead_s() if hw.kind == "gpu" else None
    print(describe(v.protocol, None if override is None else override * 1e6))
    note = interpreter_note(trace.rows, hw.name)
    if note:
        print(f"note: {note}; the errors below compare it with a GPU model")
    print(format_summary(v.summary))
    write_outputs(o, v.rows_table, v.summary, v.frame, f"{Path(trace_path).name} on {hw.name}")


def run_against(against: str, hw: HardwareSpec, *, config: str, select: str | None,
                calibration: str | None, cache_dir: str | Path | None, o: Outputs,
                sample: int | None = None) -> None:
    start = time.perf_counter()
    m = read_measurements(against)
    params, table = DEFAULT_PARAMS, shipped()
    if calibration:
        c = read_calibration(calibration)
        hw, params, table = apply_hw(hw, c), apply_params(params, c), apply_protocols(table, c)
    r = validate_against(m, hw, config=config, selection=select, sample=sample, cache_dir=cache_dir,
                         params=params, protocols=table)
    name = Path(against).name
    print(f"validation of {name} ({m.source}, {len(m.rows)} rows) on {hw.name}"
          + (f" with {calibration}" if calibration else ""))
    for note in r.measurements.notes:  # the reader's, then the selection's and the sample's
        print(f"  {note}")
    print("  times per measured call: kernel bodies + the row's protocol cost "
          "(mpsim/sim/protocols.yaml), roofline = t_lower + the same cost")
    print(format_summary(r.summary))
    print(format_unpredicted(r.unpredicted, len(r.frame)))
    write_outputs(o, r.rows_table, r.summary, r.frame, f"{name} on {hw.name}")
    stats = r.prediction.stats
    print(f"{stats.get('launches', 0)} launches ({stats.get('simulated', 0)} simulated, "
          f"{stats.get('memo_hits', 0)} from the memo) in {time.perf_counter() - start:.1f} s")
