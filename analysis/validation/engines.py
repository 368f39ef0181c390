"""End to end against the engines' own published numbers (issue 23 point 4).

    python -m mpsim.analysis.validation.engines [--benchmarks ../shared/engine-benchmarks.md]
                                                [--doc docs/validation.md] [--print] [--no-cache]

Reads ../shared/engine-benchmarks.md in place (engine_bench.py; a row whose wording no longer parses
is an error naming it), sets up the rows (engine_rows.py, engine_rows_tp_fp8.py: issue 23's E1 BF16
and INT4-AWQ, E4 FP16, E5 bf16 and int4 at TP 1, E6, E8 FP16 and W4A16; issue 26's FP8 runs of E1,
E4 and E5 and E7; issue 25's E2 and E5 at TP 4) as mpsim runs with the matching engine file, model,
GPU hardware file, policy, tensor-parallel degree and workload (engine_run.py), simulates each with
the shipped defaults (E7 through `mpsim serve`) and counts it as the row counts (whole run, per GPU,
decode rate, request latency), and writes the comparison, with each row's owning issue and its
targets, between the `<!-- validation:engines -->` markers of docs/validation.md (engine_table.py).

These rows are tests, never inputs: no constant of mpsim is set or fitted from them, and nothing here
feeds a number back into the models. The kernels standing in for those not modelled yet are named
in the table's notes; rerun this after the kernel libraries land to refresh the table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mpsim.analysis.validation.engine_bench import default_path, read_table
from mpsim.analysis.validation.engine_rows import setups
from mpsim.analysis.validation.engine_run import predict, runs, stand_ins
from mpsim.analysis.validation.engine_table import block, outcomes
from mpsim.errors import MpsimInputError

BLOCK = "engines"


def comparison(benchmarks: Path, cache_dir: str | Path | None) -> str:
    """The docs block for the benchmarks file at `benchmarks`."""
    from mpsim.sim.memo import LaunchMemo, default_cache_dir

    rows = setups(read_table(benchmarks))
    todo = [r for s in rows for r in runs(s)]
    memo = LaunchMemo(default_cache_dir() if cache_dir == "default" else cache_dir)
    predicted = []
    for i, run in enumerate(todo, 1):
        predicted.append(predict(run, memo))
        print(f"[{i}/{len(todo)}] {run.setup.row} {run.precision.label} batch {run.batch}: "
              f"{predicted[-1]:.4g}", file=sys.stderr)
    return block(rows, outcomes(todo, predicted), {s.row: stand_ins(s) for s in rows})


def main(argv: Sequence[str] | None = None) -> int:
    from mpsim.analysis.validation.report_md import write_doc

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    root = Path(__file__).resolve().parents[2]
    p.add_argument("--benchmarks", type=Path, default=default_path())
    p.add_argument("--doc", type=Path, default=root / "docs" / "validation.md")
    p.add_argument("--print", action="store_true", help="print the block instead of writing the doc")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk memo")
    args = p.parse_args(argv)
    try:
        if not args.print:
            write_doc(args.doc, {BLOCK: ""}, dry=True)  # a missing marker fails before any work
        text = comparison(args.benchmarks, None if args.no_cache else "default")
    except MpsimInputError as exc:
        print(f"engines: error: {exc}", file=sys.stderr)
        return 2
    if args.print:
        print(text)
    else:
        write_doc(args.doc, {BLOCK: text})
        print(f"wrote the {BLOCK} block of {args.doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
