"""`mpsim validate (TRACE | --against FILE) --hw H` and `mpsim calibrate (TRACE | --against FILE)`.

validate: per-row table (`--out`), per class and M band summary (stdout, `--summary`), scatter plot
only with `--plot`; exits 0 whenever the input was read. calibrate: a trace fits a calibrated
hardware file (as before); `--against` fits the named constants and writes a calibration file
(docs/validation.md#calibration).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.calibrate_cli import add_calibrate, check_selection, format_calibration
from mpsim.commands.common import add_hw_arg, hardware
from mpsim.commands.simulate import add_cache_args, cache_dir
from mpsim.errors import MpsimInputError

if TYPE_CHECKING:
    import pandas as pd

CONFIG_CHOICES = ("best", "heuristic")  # mpsim.analysis.validation.adapter.CONFIG_CHOICES

__all__ = ["format_calibration", "register"]


def register(sub: Any) -> None:
    v = sub.add_parser("validate", help="compare simulated with measured times (a trace or a table)")
    v.add_argument("trace", nargs="?", help="a trace with measured_us (captured on a GPU)")
    v.add_argument("--against", metavar="FILE",
                   help="a measured table instead of a trace: aiconfigurator gemm_perf / "
                        "generation_attention_perf / context_attention_perf .parquet, Vidur mlp.csv, "
                        "or the generic CSV (docs/validation.md)")
    add_hw_arg(v)
    v.add_argument("--out", help="per-row CSV: every input column, then predicted_us, roofline_us, "
                                 "error, config, status")
    v.add_argument("--summary", help="per class and M band summary as CSV")
    v.add_argument("--plot", help="write a predicted-vs-measured scatter plot (PNG)")
    v.add_argument("--config", choices=CONFIG_CHOICES, default="best",
                   help="--against GEMMs: the model-guided best config (default) or the heuristic")
    v.add_argument("--select", metavar="NAME",
                   help="--against: validate only a named row selection (others: status skipped; "
                        "docs/validation.md lists them)")
    v.add_argument("--calibration", help="apply a calibration file (mpsim calibrate --against)")
    add_cache_args(v)
    v.set_defaults(func=_validate)
    add_calibrate(sub)


def _write_outputs(args: argparse.Namespace, rows: pd.DataFrame, summary: pd.DataFrame,
                   frame: pd.DataFrame, title: str) -> None:
    from mpsim.analysis.validation.against import MODELS
    from mpsim.analysis.validation.plots import scatter  # matplotlib: only for --plot
    if args.out:
        rows.to_csv(args.out, index=False)
        print(f"wrote {args.out} ({len(rows)} rows)")
    if args.summary:
        summary.to_csv(args.summary, index=False)
        print(f"wrote {args.summary}")
    if args.plot:
        scatter(frame[frame["status"] == "ok"], MODELS, args.plot, title)
        print(f"wrote {args.plot}")


def _validate(args: argparse.Namespace) -> int:
    # pandas, the simulator and the validation tables load here, not when the CLI builds its parser
    from mpsim.analysis.validation.metrics import format_summary
    from mpsim.analysis.validation.trace_form import interpreter_note, validate_trace
    from mpsim.sim.protocols import describe
    from mpsim.traces.io import read_trace

    if (args.trace is None) == (args.against is None):
        raise MpsimInputError("validate: give a trace or --against FILE (one of them)")
    if args.against is not None:
        return _against(args)
    if args.calibration or args.select:
        raise MpsimInputError("validate TRACE: --calibration and --select apply to --against")
    trace = read_trace(args.trace)
    hw = hardware(args.hw)
    v = validate_trace(trace, hw, cache_dir(args))
    measured = int((v.frame["status"] == "ok").sum())
    print(f"validation of {Path(args.trace).name} on {hw.name}: {measured} measured launches")
    override = hw.launch_overhead_s()
    print(describe(v.protocol, None if override is None else override * 1e6))
    note = interpreter_note(trace.rows, hw.name)
    if note:
        print(f"note: {note}; the errors below compare it with a GPU model")
    print(format_summary(v.summary))
    _write_outputs(args, v.rows_table, v.summary, v.frame, f"{Path(args.trace).name} on {hw.name}")
    return 0


def _against(args: argparse.Namespace) -> int:
    # pandas, the simulator and the readers load here, not when the CLI builds its parser
    from mpsim.analysis.validation.against import format_unpredicted, validate_against
    from mpsim.analysis.validation.constants import apply_hw, apply_params, apply_protocols, read_calibration
    from mpsim.analysis.validation.metrics import format_summary
    from mpsim.analysis.validation.sources import read_measurements
    from mpsim.sim.params import DEFAULT_PARAMS
    from mpsim.sim.protocols import shipped

    check_selection(args.select)
    start = time.perf_counter()
    m = read_measurements(args.against)
    hw, params, table = hardware(args.hw), DEFAULT_PARAMS, shipped()
    if args.calibration:
        c = read_calibration(args.calibration)
        hw, params, table = apply_hw(hw, c), apply_params(params, c), apply_protocols(table, c)
    r = validate_against(m, hw, config=args.config, selection=args.select, cache_dir=cache_dir(args),
                         params=params, protocols=table)
    name = Path(args.against).name
    print(f"validation of {name} ({m.source}, {len(m.rows)} rows) on {hw.name}"
          + (f" with {args.calibration}" if args.calibration else ""))
    for note in m.notes:
        print(f"  {note}")
    print("  times per measured call: kernel bodies + the row's protocol cost "
          "(mpsim/sim/protocols.yaml), roofline = t_lower + the same cost")
    print(format_summary(r.summary))
    print(format_unpredicted(r.unpredicted, len(r.frame)))
    _write_outputs(args, r.rows_table, r.summary, r.frame, f"{name} on {hw.name}")
    stats = r.prediction.stats
    print(f"{stats.get('launches', 0)} launches ({stats.get('simulated', 0)} simulated, "
          f"{stats.get('memo_hits', 0)} from the memo) in {time.perf_counter() - start:.1f} s")
    return 0
