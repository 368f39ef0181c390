"""`mpsim demo --out out`: the main job (`make demo`): the default sweep, its tables and its charts.

Runs analysis/specs/default.yaml (3 models x 11 policies x 4 devices x 2 workloads, less fp8 on
npu-edge) on the simulator and the roofline, writes OUT/sweep/ (points, results.parquet), OUT/results.csv and
OUT/figures/*.png, runs a small scheduler evaluation on the tiny model (OUT/evaluation/, its Pareto
chart copied to OUT/figures/pareto.png), and prints a short summary. Rerunning into the same OUT
reuses finished sweep points.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from mpsim.commands.common import check_outputs, warn
from mpsim.errors import MpsimInputError


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the default sweep and write its tables and charts to --out")
    p.add_argument("--out", default="out", help="output folder (default out/)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: cores)")
    p.add_argument("--spec", default=None, help="a sweep spec to use instead of the default one")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-evaluation", action="store_true",
                   help="skip the small scheduler evaluation on the tiny model (quality vs speedup)")
    p.add_argument("--no-serving", action="store_true",
                   help="skip the small serving sweep (analysis/specs/serve-demo.yaml, docs/serving.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The sweep (pandas, the simulator) and the charts (matplotlib) load here, not when the CLI
    # builds its parser: other commands do not pay for them.
    from mpsim.analysis.demo_report import draw_figures, summary_text
    from mpsim.analysis.sweep.default import demo_spec
    from mpsim.analysis.sweep.run import run_sweep
    from mpsim.traces.atomic import write_csv_atomic, write_text_atomic

    if args.workers is not None and args.workers < 1:  # before the spec is read and the sweep starts
        raise MpsimInputError(f"--workers: expected an integer >= 1, got {args.workers}")
    check_outputs(folder=args.out)
    out = Path(args.out)
    spec = demo_spec(args.spec)
    for message in spec.warnings:
        warn(message)
    print(f"demo: {len(spec)} points ({len(spec.groups())} traces) into {out}/sweep "
          f"with perf models {', '.join(spec.perf_models)}")
    outcome = run_sweep(spec, out / "sweep", workers=args.workers, progress=not args.no_progress)
    table = outcome.table
    write_csv_atomic(table, out / "results.csv", index=False)
    print(f"sweep: {outcome.computed} points computed, {outcome.skipped} reused, "
          f"{outcome.seconds:.1f} s; wrote {outcome.path} and {out / 'results.csv'}")
    for line in draw_figures(table, out / "figures", {m.name: m for m in spec.models}, spec.hardware):
        print(line)
    if args.spec is None and not args.no_serving:
        from mpsim.analysis.sweep.serve_demo import serve_demo

        print()
        for line in serve_demo(out, args.workers, not args.no_progress):
            print(line)
    if args.spec is None and not args.no_evaluation:
        _evaluation(out, not args.no_progress)
    else:
        print("pareto chart: skipped (no evaluation run; `mpsim evaluate --out DIR` draws it)")
    text = summary_text(table, "; ".join(map(str, spec.exclude)))
    write_text_atomic(text + "\n", out / "summary.txt")
    print()
    print(text)
    return 0


# A small PMPD-style comparison on the tiny model: real generations for quality, the simulator for
# speed on MobileLLaMA-1.4B's shapes (the tiny model's own steps are launch-bound).
EVALUATION_SPEED_MODEL = "mobilellama-1.4b"


def _evaluation(out: Path, bar: bool) -> None:
    # The engine (torch, the kernels) loads here, not when the CLI builds its parser.
    from mpsim.analysis.evaluate.config import EvalConfig
    from mpsim.commands.evaluate import run_evaluation

    folder = out / "evaluation"
    cfg = EvalConfig(
        policies=("fp16", "ap4", "ap3", "ap4-3", "ap4-4@8-3"),
        schedulers=("uniform-high", "uniform-low", "phase-aware", "static", "learned", "random", "budget"),
        hw=("h200-sxm", "npu-llm"), slack=0.01, val_samples=12, test_samples=12)
    print(f"\nevaluation: tiny model, timed on {EVALUATION_SPEED_MODEL}, {cfg} -> {folder}")
    run_evaluation(cfg, folder, speed_model=EVALUATION_SPEED_MODEL, bar=bar)
    from mpsim.traces.atomic import atomic_write

    atomic_write(out / "figures" / "pareto.png", lambda tmp: shutil.copyfile(folder / "pareto.png", tmp))
    print(f"wrote {out / 'figures' / 'pareto.png'} (quality vs speedup)")
