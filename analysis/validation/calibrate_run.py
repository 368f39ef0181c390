"""The two forms of `mpsim calibrate`, run from parsed arguments (the command only parses them):

- `run_trace`: a captured trace -> a calibrated hardware file (calibrate_trace.py, calibrated_file.py);
- `run_against`: a measured table -> the named constants, optionally SimParams fields by name
  (calibration.py, fit_params.py) -> a calibration file (constants.py), with held-out and
  cross-device errors.

Each prints what it fitted and the errors, and warns on stderr when the timings come from a CPU
interpreter rather than the GPU being calibrated.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

from mpsim.analysis.validation.calibrate_trace import CalibrationResult, calibrate
from mpsim.analysis.validation.calibrated_file import write_calibrated
from mpsim.analysis.validation.calibration import CalibrationReport, calibrate_rows, cross_device
from mpsim.analysis.validation.constants import Constants, write_calibration
from mpsim.analysis.validation.fit_params import fit_params, parse_fit_params
from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import read_measurements
from mpsim.analysis.validation.trace_form import interpreter_note
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.io import read_trace


def run_trace(trace_path: str, hw_name: str, out: str, holdout: float) -> Path:
    trace = read_trace(trace_path)
    hw = load_hardware(hw_name)
    note = interpreter_note(trace.rows, hw.name)
    if note:
        print(f"mpsim: warning: {note}; the fitted constants describe that host, not {hw.name}",
              file=sys.stderr)
    result = calibrate(trace.rows, hw, holdout)
    print(format_calibration(result))
    path = write_calibrated(hw_name, result, Path(trace_path).name, out)
    print(f"wrote {path}")
    return path


@dataclass(frozen=True)
class AgainstArgs:
    against: str
    hw: str
    out: str
    select: str | None = None
    fit_rows: int = 400
    test_rows: int = 1500
    predict: tuple[str, ...] = ()
    fit_params: str | None = None
    fit_iters: int = 60


def predict_targets(specs: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for spec in specs:
        hw, sep, path = spec.partition("=")
        if not sep or not hw or not path:
            raise MpsimInputError(f"--predict {spec!r}: expected H2=FILE2 (a hardware name or file, "
                                  "then a measured table)")
        out.append((hw, path))
    return out


def run_against(a: AgainstArgs) -> Path:
    if a.fit_rows < 1 or a.test_rows < 0 or a.fit_iters < 1:
        raise MpsimInputError(f"--fit-rows {a.fit_rows} / --test-rows {a.test_rows} / --fit-iters "
                              f"{a.fit_iters}: expected at least 1 row fitted, 0 or more held out "
                              "and at least 1 iteration")
    names = parse_fit_params(a.fit_params)
    targets = predict_targets(a.predict)
    hw = load_hardware(a.hw)
    m = apply_selection(read_measurements(a.against), a.select)
    refine = (names, functools.partial(fit_params, names=names, iters=a.fit_iters)) if names else None
    report = calibrate_rows(m.rows, hw, fit_rows=a.fit_rows, test_rows=a.test_rows, refine=refine)
    for hw2_name, path in targets:
        m2 = apply_selection(read_measurements(path), a.select)
        report.errors[f"cross_device {hw2_name}"] = cross_device(
            m2.rows, load_hardware(hw2_name), report, test_rows=a.test_rows)
    print(format_against(report, hw.name))
    fitted_on = {"hw": hw.name, "file": Path(a.against).name, "selection": a.select,
                 "fit_rows": report.errors["in_sample"]["rows"]}
    written = write_calibration(a.out, report.after, DEFAULT_PARAMS, fitted_on, report.errors)
    print(f"wrote {written}")
    return written


def _constants(c: Constants) -> str:
    protocols = ", ".join(f"{k} {v:.2f} us" for k, v in sorted(c.protocol_us.items()))
    params = "".join(f", {k} {v:.4g}" for k, v in sorted(c.params.items()))
    return (f"bandwidth fraction {c.bandwidth_fraction:.3f}, L2 {c.l2_bytes_per_clock_per_sm or 0:.1f} "
            f"B/clk/SM, dequant x{c.dequant_scale:.2f}{params}; per call: {protocols}")


def format_against(r: CalibrationReport, hw_name: str) -> str:
    lines = [f"calibration on {hw_name} ({r.wall_s:.0f} s)",
             f"  shipped: {_constants(r.before)}", f"  fitted:  {_constants(r.after)}",
             f"  {'rows':>28s} {'n':>6s} {'shipped':>8s} {'fitted':>8s} {'roofline':>9s}  (MAPE %)"]
    for name, e in r.errors.items():
        lines.append(f"  {name:>28s} {e['rows']:6d} {e['before_mape_pct']:8.2f} "
                     f"{e['after_mape_pct']:8.2f} {e['roofline_mape_pct']:9.2f}")
    return "\n".join(lines)


def _knobs(k: Constants) -> str:
    return (f"bandwidth fraction {k.bandwidth_fraction:.3f}, overhead "
            f"{k.launch_overhead_us or 0.0:.2f} us, dequant scale {k.dequant_scale:.3f}")


def format_calibration(r: CalibrationResult) -> str:
    return "\n".join([
        f"  before: {_knobs(r.before)}",
        f"  after:  {_knobs(r.after)}",
        f"  train MAPE {r.train_mape_before:.2f}% -> {r.train_mape_after:.2f}% ({r.train_launches} launches)",
        f"  held-out MAPE {r.test_mape_before:.2f}% -> {r.test_mape_after:.2f}% "
        f"({r.test_launches} launches; roofline {r.test_mape_roofline:.2f}%)",
    ])
