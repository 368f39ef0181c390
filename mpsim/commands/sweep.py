"""`mpsim sweep SPEC.yaml --out DIR`: run a policy x hardware grid into a tidy Parquet table."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mpsim.analysis.sweep import default_workers
from mpsim.commands.common import add_context_arg, check_outputs, warn


def register(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run a YAML grid of models x policies x hardware x workloads")
    p.add_argument("spec", help="sweep spec (YAML; see docs/sweeps.md)")
    p.add_argument("--out", required=True,
                   help="results folder: points/ (one file per finished point) and results.parquet; "
                        "rerunning into it skips finished points")
    p.add_argument("--workers", type=int, default=None,
                   help=f"local worker processes (default: the usable cores, here {default_workers()}; "
                        "1 runs in this process)")
    p.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="run on Dask: 'local' starts a LocalCluster of --workers processes here; "
                        "or a scheduler address (e.g. tcp://host:8786) whose workers see --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_context_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas, the simulator and the executors load here, not when the CLI builds its parser
    from mpsim.analysis.sweep.run import run_sweep
    from mpsim.analysis.sweep.serve import slo_lines
    from mpsim.analysis.sweep.spec import load_spec
    from mpsim.analysis.sweep.store import PointStore

    spec = load_spec(args.spec, allow_beyond_context=args.allow_beyond_context)
    check_outputs(folder=args.out)
    for message in spec.warnings:
        warn(message)
    try:
        outcome = run_sweep(spec, args.out, workers=args.workers, dask_address=args.dask,
                            progress=not args.no_progress)
    except KeyboardInterrupt:
        done = len(PointStore(args.out).finished() & set(spec.keys()))
        print(f"\ninterrupted: {done} of {len(spec)} points are saved in {args.out}; "
              "run the same command again to finish the rest", file=sys.stderr)
        return 130
    served = 0 if outcome.serve_table is None else len(outcome.serve_table)
    print(f"sweep {spec.name}: {len(spec) + served} points ({outcome.computed} computed now, "
          f"{outcome.skipped} already done) in {outcome.seconds:.1f} s; wrote "
          + ", ".join(str(p) for p in (outcome.path if len(spec) else None, outcome.serve_path) if p))
    if outcome.serve_table is not None:
        for line in slo_lines(outcome.serve_table):
            print(line)
    return 0
