"""Benchmark of the sweep runner: points per minute of the default sweep, 1 and 2 local workers, Dask.

Each configuration runs the same spec from nothing (fresh output folder, fresh simulator memo cache,
so no run reuses another's work) and is timed end to end, spec loading excluded, the merge included.
The Dask run uses a LocalCluster of as many single-threaded worker processes as the 2-worker local run,
so the difference is the Dask path's own overhead (scheduler, serialization, its start-up excluded).

    python -m mpsim.analysis.bench.sweep [--groups N] [--repeat R] [--csv analysis/results/sweep_bench.csv]
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import pandas as pd

from mpsim.analysis.sweep.default import demo_spec
from mpsim.analysis.sweep.run import NO_FIXED_PORT, run_sweep
from mpsim.analysis.sweep.spec import SweepSpec
from mpsim.traces.atomic import write_csv_atomic

CSV = Path("analysis/results/sweep_bench.csv")
# What a forked local worker has already imported and a fresh Dask worker process has not.
WARM_MODULES = ("mpsim.analysis.sweep.point", "mpsim.sim.replay")


def subset(spec: SweepSpec, groups: int | None) -> SweepSpec:
    """The first `groups` (model, policy, workload) groups' worth of the spec, in grid order."""
    if groups is None:
        return spec
    policies = spec.policies[: max(1, groups)]
    return replace(spec, models=spec.models[:1], workloads=spec.workloads[:1], policies=policies)


def timed(spec: SweepSpec, workers: int, dask: str | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="mpsim-bench-") as tmp:
        os.environ["MPSIM_CACHE_DIR"] = str(Path(tmp) / "memo")  # cold simulator memo every run
        t0 = time.perf_counter()
        outcome = run_sweep(spec, Path(tmp) / "sweep", workers=workers, dask_address=dask, progress=False)
        seconds = time.perf_counter() - t0
    if outcome.computed != len(spec):
        raise RuntimeError(f"benchmark run computed {outcome.computed} of {len(spec)} points")
    return seconds


def timed_dask(spec: SweepSpec, workers: int) -> float:
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory(prefix="mpsim-bench-memo-") as memo:
        os.environ["MPSIM_CACHE_DIR"] = memo  # the worker processes inherit it at start
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          scheduler_kwargs=NO_FIXED_PORT) as cluster, Client(cluster) as client:
            for module in WARM_MODULES:  # imports are start-up, not sweep time
                client.run(importlib.import_module, module)
            return timed(spec, workers, cluster.scheduler_address)


def bench(spec: SweepSpec, with_dask: bool, repeat: int) -> pd.DataFrame:
    """One row per (round, configuration); the configurations interleave so drift hits all alike."""
    rows = []
    runs: list[tuple[str, int]] = [("local", 1), ("local", 2)] + ([("dask", 2)] if with_dask else [])
    for round_ in range(repeat):
        for executor, workers in runs:
            load = os.getloadavg()[0]  # the machine may be shared: say how busy it was
            seconds = timed(spec, workers) if executor == "local" else timed_dask(spec, workers)
            rows.append({"round": round_, "executor": executor, "workers": workers,
                         "points": len(spec), "traces": len(spec.groups()),
                         "perf_models": "+".join(spec.perf_models), "seconds": round(seconds, 2),
                         "points_per_min": round(60 * len(spec) / seconds, 1),
                         "load_avg_1min_before": round(load, 2)})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    table["cpus"] = os.cpu_count()
    table["machine"] = platform.machine()
    table["date"] = date.today().isoformat()
    return table


def markdown(table: pd.DataFrame) -> str:
    """Median over rounds per configuration, with the range, and the Dask/local ratio of medians."""
    g = table.groupby(["executor", "workers"], sort=False)
    med = g["seconds"].median()
    local2 = med[("local", 2)]
    lines = ["| executor | workers | points | seconds (median, min-max) | points/min | time vs 2 local "
             "| load before |", "|---|---|---|---|---|---|---|"]
    for (executor, workers), sel in g:
        m = med[(executor, workers)]
        lines.append(f"| {executor} | {workers} | {sel['points'].iloc[0]} | {m:.1f} "
                     f"({sel['seconds'].min():.1f}-{sel['seconds'].max():.1f}) | "
                     f"{60 * sel['points'].iloc[0] / m:.0f} | {m / local2:.2f}x | "
                     f"{sel['load_avg_1min_before'].median():.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=None, help="only the first N policies of one model "
                   "and workload (a quick run); default: the whole default sweep")
    p.add_argument("--csv", type=Path, default=CSV)
    p.add_argument("--no-dask", action="store_true")
    p.add_argument("--repeat", type=int, default=3, help="rounds of all configurations (default 3)")
    args = p.parse_args(argv)
    spec = subset(demo_spec(), args.groups)
    print(f"benchmarking {len(spec)} points ({len(spec.groups())} traces), perf models {spec.perf_models}")
    table = bench(spec, not args.no_dask, args.repeat)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, args.csv, index=False)
    print(f"wrote {args.csv}\n")
    print(markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
