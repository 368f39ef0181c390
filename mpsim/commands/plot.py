"""`mpsim plot [RESULTS] --kind K --out FILE`: draw one figure from a table or a trace.

speedup, memory, energy: a sweep's results table (energy: J per generated token). pareto: an
`mpsim evaluate` table (evaluation.parquet/.csv), or any table with policy, a speedup and a quality
column. roofline: --trace T --hw H. timeline: --trace T
--hw H, or a table of launches with start_s/end_s. validation: --trace T (with measured_us) --hw H,
or a table of op, measured_s and predicted_s. serve-latency, serve-capacity: a sweep's
serve_results.parquet; serve-timeline: a `mpsim serve` run's iterations.parquet. The suffix of --out
picks PNG or SVG;
no suffix writes both.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.common import PERF_MODEL_NAMES, add_reprice_args, check_outputs, engine_rows, hardware
from mpsim.errors import MpsimInputError

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("speedup", "memory", "energy", "roofline", "timeline", "validation", "pareto", "serve-latency",
         "serve-capacity", "serve-timeline")


def register(sub: Any) -> None:
    p = sub.add_parser("plot", help="draw a figure (speedup, memory, energy, roofline, timeline, ...)")
    p.add_argument("results", nargs="?", help="a table (Parquet or CSV): sweep results, launches, ...")
    p.add_argument("--kind", required=True, choices=KINDS, help="the figure to draw")
    p.add_argument("--out", required=True, help="figure file: .png, .svg, or no suffix for both")
    p.add_argument("--trace", help="trace file (roofline, timeline, validation)")
    p.add_argument("--hw", help="hardware name or YAML file (with --trace)")
    add_reprice_args(p)
    p.add_argument("--perf-model", choices=PERF_MODEL_NAMES, default=None,
                   help="performance model: for a trace, default sim; "
                        "for a sweep table, default sim if the table has it")
    p.add_argument("--step", type=int, default=None, help="timeline: decode step to show (default 1)")
    p.add_argument("--start-ms", type=float, default=None, help="timeline: window start (ms)")
    p.add_argument("--window-ms", type=float, default=None, help="timeline: window width (ms)")
    p.add_argument("--quality", default=None,
                   help="pareto: the quality column, higher is better (default: quality; on an `mpsim "
                        "evaluate` table rouge_l_bytes)")
    p.add_argument("--speedup", default=None,
                   help="pareto: the speedup column (default: speedup, else speedup_vs_fp16)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mpsim.analysis.plots.common import output_paths

    check_outputs(*map(str, output_paths(args.out)))
    paths = _draw(args)
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _draw(args: argparse.Namespace) -> list[Path]:
    # matplotlib (and pandas, the simulator) load here, not when the CLI builds its parser: other
    # commands should not pay for them
    from mpsim.analysis.plots.energy import plot_energy
    from mpsim.analysis.plots.inputs import read_table, run_title, trace_run
    from mpsim.analysis.plots.memory import plot_memory
    from mpsim.analysis.plots.roofline import plot_roofline
    from mpsim.analysis.plots.speedup import plot_speedup
    from mpsim.analysis.plots.timeline import plot_timeline
    from mpsim.analysis.plots.validation import plot_validation, validation_frame
    from mpsim.traces.io import read_trace

    if args.kind.startswith("serve-"):
        return _serve_chart(args)
    if args.kind in ("speedup", "memory", "energy", "pareto"):
        table = read_table(_need(args, "results", "a results table"))
        if args.kind == "speedup":
            return plot_speedup(table, args.out, args.perf_model)
        if args.kind == "energy":
            return plot_energy(table, args.out, args.perf_model)
        if args.kind == "memory":
            return plot_memory(table, args.out)
        return _pareto(table, args)
    if args.kind in ("timeline", "validation") and args.results and not args.trace:
        table, name = read_table(args.results), Path(args.results).name
        if args.kind == "validation":  # a table of op, measured_s, predicted_s
            return plot_validation(table, name, args.out)
        return plot_timeline(table, name, args.out, args.step, args.start_ms, args.window_ms)
    trace = read_trace(_need(args, "trace", "a trace file (--trace)"))
    hw = hardware(_need(args, "hw", "a hardware model (--hw)"))
    trace = engine_rows(trace, hw, args)
    model = args.perf_model or "sim"
    run_ = trace_run(trace, hw, model)
    title = run_title(trace, hw, model)
    if args.kind == "roofline":
        return plot_roofline(run_, hw, title, args.out)
    if args.kind == "timeline":
        return plot_timeline(run_, title, args.out, args.step, args.start_ms, args.window_ms)
    return plot_validation(validation_frame(run_), title, args.out)


def _serve_chart(args: argparse.Namespace) -> list[Path]:
    from mpsim.analysis.plots.inputs import read_table
    from mpsim.analysis.plots.serve import plot_serve_capacity, plot_serve_latency, plot_serve_timeline

    path = _need(args, "results", "a serve table (serve_results.parquet or iterations.parquet)")
    table = read_table(path)
    if args.kind == "serve-latency":
        return plot_serve_latency(table, args.out)
    if args.kind == "serve-capacity":
        return plot_serve_capacity(table, args.out)
    return plot_serve_timeline(table, run_label(Path(path)), args.out)


def run_label(path: Path) -> str:
    """A serve run's title from the summary.json beside its iterations table, else the file's name."""
    summary = path.with_name("summary.json")
    if summary.is_file():
        import json

        s = json.loads(summary.read_text())
        return (f"{s.get('model')} {s.get('policy')} on {s.get('hw')}: {s.get('requests')} requests "
                f"({s.get('arrivals')})")
    return path.name


def _need(args: argparse.Namespace, attr: str, what: str) -> str:
    value = getattr(args, attr)
    if not value:
        raise MpsimInputError(f"--kind {args.kind} needs {what}")
    return str(value)


def _pareto(table: pd.DataFrame, args: argparse.Namespace) -> list[Path]:
    """An `mpsim evaluate` table as the evaluation draws it (a panel per hardware); any other table
    with policy, a speedup and a quality column as one panel (or one per model)."""
    from mpsim.analysis.evaluate.figures import is_evaluation_table, pareto_plot
    from mpsim.analysis.plots.pareto import plot_pareto

    if is_evaluation_table(table):
        return pareto_plot(table, args.out, args.quality or "rouge_l_bytes",
                           args.speedup or "speedup_vs_fp16")
    return plot_pareto(_pareto_table(table, args.speedup), args.out, args.quality or "quality")


def _pareto_table(table: pd.DataFrame, speedup: str | None) -> pd.DataFrame:
    column = speedup or ("speedup" if "speedup" in table.columns else "speedup_vs_fp16")
    if column not in table.columns:
        raise MpsimInputError(f"pareto: the table has no column {column!r}; it has "
                              f"{', '.join(map(str, table.columns))}")
    return table.rename(columns={column: "speedup"}) if column != "speedup" else table
