"""`mpsim calibrate TRACE --hw H --out F.yaml [--holdout 0.25]` (a calibrated hardware file) and
`mpsim calibrate --against FILE --hw H --out F.yaml [--predict H2=FILE2 ...]` (the named constants,
docs/validation.md#calibration)."""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.commands.common import add_hw_arg
from mpsim.errors import MpsimInputError


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
    c.add_argument("--fit-params", metavar="NAMES",
                   help="--against: also fit these simulator constants (SimParams fields, a kernel "
                        "library's as LIBRARY.FIELD, e.g. fa3.softmax_ops; comma-separated) jointly; "
                        "written to the calibration file's sim_params")
    c.add_argument("--fit-iters", type=int, default=60,
                   help="--fit-params: Nelder-Mead iterations (default 60)")
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
    check_selection(args.select)
    # pandas and the simulator load here, not when the CLI builds its parser
    from mpsim.analysis.validation.calibrate_run import AgainstArgs, run_against, run_trace

    if args.against is None:
        run_trace(args.trace, args.hw, args.out, args.holdout)
    else:
        run_against(AgainstArgs(args.against, args.hw, args.out, args.select, args.fit_rows,
                                args.test_rows, tuple(args.predict), args.fit_params, args.fit_iters))
    return 0
