"""`mpsim validate (TRACE | --against FILE) --hw H` and `mpsim calibrate (TRACE | --against FILE)`.

validate: per-row table (`--out`), per class and M band summary (stdout, `--summary`), scatter plot
only with `--plot`; exits 0 whenever the input was read. calibrate: a trace fits a calibrated
hardware file; `--against` fits the named constants and writes a calibration file
(docs/validation.md#calibration). Both only parse arguments here; the work is in
mpsim/analysis/validation/ (validate_run.py, calibrate_run.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.commands.calibrate_cli import add_calibrate, check_selection
from mpsim.commands.common import add_hw_arg, check_outputs, hardware
from mpsim.commands.simulate import add_cache_args, cache_dir
from mpsim.errors import MpsimInputError

CONFIG_CHOICES = ("best", "heuristic")  # mpsim.analysis.validation.adapter.CONFIG_CHOICES

__all__ = ["register"]


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
    v.add_argument("--sample", metavar="N", type=int,
                   help="--against: price a stratified sample of at most N of the selected rows "
                        "(class x M band x dtype x kernel_source, fixed seed; others: status "
                        "'skipped: outside sample N')")
    v.add_argument("--calibration", help="apply a calibration file (mpsim calibrate --against)")
    add_cache_args(v)
    v.set_defaults(func=_validate)
    add_calibrate(sub)


def _validate(args: argparse.Namespace) -> int:
    if (args.trace is None) == (args.against is None):
        raise MpsimInputError("validate: give a trace or --against FILE (one of them)")
    if args.against is None and (args.calibration or args.select or args.sample is not None):
        raise MpsimInputError("validate TRACE: --calibration, --select and --sample apply to --against")
    if args.sample is not None and args.sample < 1:
        raise MpsimInputError(f"--sample {args.sample}: expected at least 1 row per table")
    check_outputs(args.out, args.summary, args.plot)
    check_selection(args.select)
    hw = hardware(args.hw)
    # pandas, the simulator and the validation tables load here, not when the CLI builds its parser
    from mpsim.analysis.validation import validate_run

    outputs = validate_run.Outputs(args.out, args.summary, args.plot)
    if args.against is None:
        validate_run.run_trace(args.trace, hw, cache_dir(args), outputs)
    else:
        validate_run.run_against(args.against, hw, config=args.config, select=args.select,
                                 calibration=args.calibration, cache_dir=cache_dir(args), o=outputs,
                                 sample=args.sample)
    return 0
