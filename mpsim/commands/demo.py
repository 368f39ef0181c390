"""`mpsim demo --out out`: the main job (`make demo`): the default sweep, its tables and its charts.

Runs analysis/specs/default.yaml (3 models x 9 policies x 4 devices x 2 workloads) with every
performance model of the spec this checkout can run (the simulator and the roofline; a missing one is
named on the console), writes OUT/sweep/ (points, results.parquet), OUT/results.csv and
OUT/figures/*.png, and prints a short summary. Rerunning into the same OUT reuses finished points.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mpsim.analysis.demo_report import draw_figures, summary_text
from mpsim.analysis.sweep_default import runnable_spec
from mpsim.analysis.sweep_run import run_sweep


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the default sweep and write its tables and charts to --out")
    p.add_argument("--out", default="out", help="output folder (default out/)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: cores)")
    p.add_argument("--spec", default=None, help="a sweep spec to use instead of the default one")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    spec, dropped = runnable_spec(args.spec)
    for name in dropped:
        print(f"note: performance model {name!r} is not available in this checkout; the demo skips it")
    print(f"demo: {len(spec)} points ({len(spec.groups())} traces) into {out}/sweep "
          f"with perf models {', '.join(spec.perf_models)}")
    outcome = run_sweep(spec, out / "sweep", workers=args.workers, progress=not args.no_progress)
    table = outcome.table
    table.to_csv(out / "results.csv", index=False)
    print(f"sweep: {outcome.computed} points computed, {outcome.skipped} reused, "
          f"{outcome.seconds:.1f} s; wrote {outcome.path} and {out / 'results.csv'}")
    for line in draw_figures(table, out / "figures"):
        print(line)
    text = summary_text(table)
    (out / "summary.txt").write_text(text + "\n")
    print()
    print(text)
    return 0
