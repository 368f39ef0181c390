"""`mpsim calibrate TRACE --hw H --out F.yaml [--holdout 0.25]` (a calibrated hardware file) and
`mpsim calibrate --against FILE --hw H --out F.yaml [--predict H2=FILE2 ...]` (the named constants,
docs/validation.md#calibration)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.common import add_hw_arg, hardware
from mpsim.errors import MpsimInputError

if TYPE_CHECKING:
    from mpsim.analysis.validation.calibrate_trace import CalibrationResult, Knobs
    from mpsim.analysis.validation.calibration import CalibrationReport
    from mpsim.analysis.validation.constants import Constants


def add_calibrate(sub: Any) -> None:
    c = sub.add_parser("calibrate", help="fit efficiency constants to measured times")
    c.add_argument("trace", nargs="?", help="a trace with measured_us (writes a calibrated hardware file)")
    c.add_argument("--against", metavar="FILE",
                   help="a measured table (as for validate --against): fit the named constants")
    add_hw_arg(c)
    c.add_argument("--out", required=True, help="YAML to write (hardware file, or calibration file "
                                               "with --against)")
    c.add_argument("--holdout", type=float, default=0.25,
                   help="TRACE: share of distinct launches held out (default 0.25)")
    c.add_argument("--predict", action="append", default=[], metavar="H2=FILE2",
                   help="--against: also predict another device's table with only its datasheet "
                        "file changed (repeatable)")
    c.add_argument("--select", metavar="NAME", help="--against: a named row selection")
    c.add_argument("--fit-rows", type=int, default=400, help="--against: rows fitted (default 400)")
    c.add_argument("--test-rows", type=int, default=1500,
                   help="--against: held-out rows per table reported (default 1500)")
    c.set_defaults(func=_calibrate)


def check_selection(name: str | None) -> None:
    """A --select name is one of the named row selections (checked when the command runs, so that
    building the parser loads no tables)."""
    from mpsim.analysis.validation.selections import SELECTIONS

    if name is not None and name not in SELECTIONS:
        raise MpsimInputError(f"--select {name!r}: expected one of {', '.join(SELECTIONS)}")


def _calibrate(args: argparse.Namespace) -> int:
    if (args.trace is None) == (args.against is None):
        raise MpsimInputError("calibrate: give a trace or --against FILE (one of them)")
    if args.against is not None:
        return _calibrate_against(args)
    # pandas and the simulator load here, not when the CLI builds its parser
    from mpsim.analysis.validation.calibrate_trace import calibrate
    from mpsim.analysis.validation.calibrated_file import write_calibrated
    from mpsim.analysis.validation.trace_form import interpreter_note
    from mpsim.hw_models.loader import load_hardware
    from mpsim.traces.io import read_trace

    trace = read_trace(args.trace)
    hw = load_hardware(args.hw)
    note = interpreter_note(trace.rows, hw.name)
    if note:
        print(f"mpsim: warning: {note}; the fitted constants describe that host, not {hw.name}",
              file=sys.stderr)
    result = calibrate(trace.rows, hw, args.holdout)
    print(format_calibration(result))
    path = write_calibrated(args.hw, result, Path(args.trace).name, args.out)
    print(f"wrote {path}")
    return 0


def _predict_targets(specs: list[str]) -> list[tuple[str, str]]:
    out = []
    for spec in specs:
        hw, sep, path = spec.partition("=")
        if not sep or not hw or not path:
            raise MpsimInputError(f"--predict {spec!r}: expected H2=FILE2 (a hardware name or file, "
                                  "then a measured table)")
        out.append((hw, path))
    return out


def _calibrate_against(args: argparse.Namespace) -> int:
    # pandas, the simulator and the readers load here, not when the CLI builds its parser
    from mpsim.analysis.validation.calibration import calibrate_rows, cross_device
    from mpsim.analysis.validation.constants import write_calibration
    from mpsim.analysis.validation.selections import apply_selection
    from mpsim.analysis.validation.sources import read_measurements
    from mpsim.sim.params import DEFAULT_PARAMS

    check_selection(args.select)
    if args.fit_rows < 1 or args.test_rows < 0:
        raise MpsimInputError(f"--fit-rows {args.fit_rows} / --test-rows {args.test_rows}: expected "
                              "at least 1 row fitted and 0 or more held out")
    targets = _predict_targets(args.predict)
    m = apply_selection(read_measurements(args.against), args.select)
    hw = hardware(args.hw)
    report = calibrate_rows(m.rows, hw, fit_rows=args.fit_rows, test_rows=args.test_rows)
    for hw2_name, path in targets:
        m2 = apply_selection(read_measurements(path), args.select)
        report.errors[f"cross_device {hw2_name}"] = cross_device(
            m2.rows, hardware(hw2_name), report, test_rows=args.test_rows)
    print(format_against(report, hw.name))
    fitted_on = {"hw": hw.name, "file": Path(args.against).name, "selection": args.select,
                 "fit_rows": report.errors["in_sample"]["rows"]}
    written = write_calibration(args.out, report.after, DEFAULT_PARAMS, fitted_on, report.errors)
    print(f"wrote {written}")
    return 0


def _constants(c: Constants) -> str:
    protocols = ", ".join(f"{k} {v:.2f} us" for k, v in sorted(c.protocol_us.items()))
    return (f"bandwidth fraction {c.bandwidth_fraction:.3f}, L2 {c.l2_bytes_per_clock_per_sm:.1f} "
            f"B/clk/SM, dequant x{c.dequant_scale:.2f}; per call: {protocols}")


def format_against(r: CalibrationReport, hw_name: str) -> str:
    lines = [f"calibration on {hw_name} ({r.wall_s:.0f} s)",
             f"  shipped: {_constants(r.before)}", f"  fitted:  {_constants(r.after)}",
             f"  {'rows':>28s} {'n':>6s} {'shipped':>8s} {'fitted':>8s} {'roofline':>9s}  (MAPE %)"]
    for name, e in r.errors.items():
        lines.append(f"  {name:>28s} {e['rows']:6d} {e['before_mape_pct']:8.2f} "
                     f"{e['after_mape_pct']:8.2f} {e['roofline_mape_pct']:9.2f}")
    return "\n".join(lines)


def _knobs(k: Knobs) -> str:
    return (f"bandwidth fraction {k.bandwidth_fraction:.3f}, overhead {k.overhead_us:.2f} us, "
            f"dequant scale {k.dequant_scale:.3f}")


def format_calibration(r: CalibrationResult) -> str:
    return "\n".join([
        f"  before: {_knobs(r.before)}",
        f"  after:  {_knobs(r.after)}",
        f"  train MAPE {r.train_mape_before:.2f}% -> {r.train_mape_after:.2f}% ({r.train_launches} launches)",
        f"  held-out MAPE {r.test_mape_before:.2f}% -> {r.test_mape_after:.2f}% "
        f"({r.test_launches} launches; roofline {r.test_mape_roofline:.2f}%)",
    ])
