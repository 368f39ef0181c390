"""`mpsim simulate TRACE --hw H [--perf-model sim|roofline] [--out F.parquet] [--timeline F.json]`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.common import (
    DEFAULT_CACHE,
    PERF_MODEL_NAMES,
    add_context_arg,
    add_hw_arg,
    add_reprice_args,
    check_outputs,
    check_trace_context,
    engine_rows,
    hardware,
)
from mpsim.errors import MpsimInputError

if TYPE_CHECKING:
    import pandas as pd

    from mpsim.sim.result import SimResult

IDENTITY = ("op", "phase", "step", "layer", "module", "kernel")
TIMELINE_ARGS = ("bound", "cycles", "bytes_dram", "bytes_l2", "bytes_sram", "t_lower_s",
                 "busy_start_s", "busy_end_s", "energy_j")


def add_cache_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", default=DEFAULT_CACHE,
                   help="on-disk launch memo folder (default $MPSIM_CACHE_DIR or ~/.cache/mpsim/sim)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk memo")


def cache_dir(args: argparse.Namespace) -> str | None:
    return None if args.no_cache else args.cache_dir


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="replay a trace on a hardware model (SimPy or roofline)")
    p.add_argument("trace", help="trace file (Parquet)")
    add_hw_arg(p)
    p.add_argument("--perf-model", default="sim", choices=PERF_MODEL_NAMES,
                   help="performance model (default sim)")
    p.add_argument("--out", help="write per-launch results as Parquet")
    p.add_argument("--timeline", help="write a Chrome trace-event JSON (opens in Perfetto)")
    add_reprice_args(p)
    p.add_argument("--reprice-out", default=None, help="with --reprice: also write the rebuilt trace")
    add_cache_args(p)
    add_context_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas, pyarrow and the simulator (SimPy) load here, not when the CLI builds its parser
    from mpsim.sim import simulate
    from mpsim.sim.summary import format_summary
    from mpsim.traces.io import read_trace

    check_outputs(args.out, args.timeline, args.reprice_out)
    trace = read_trace(args.trace)
    check_trace_context(trace.meta, args)
    hw = hardware(args.hw)
    if args.reprice_out and not args.reprice:
        raise MpsimInputError("--reprice-out writes the rebuilt trace of --reprice; add --reprice")
    trace = engine_rows(trace, hw, args)
    if args.reprice_out:
        from mpsim.traces.io import write_trace

        print(f"wrote {write_trace(trace, args.reprice_out)}")
    result = simulate(trace, hw, args.perf_model, cache_dir=cache_dir(args))
    title = (f"{args.perf_model} of {Path(args.trace).name} on {hw.name} "
             f"({trace.meta.policy or 'unknown policy'}, {trace.meta.engine}'s kernels)")
    print(format_summary(result.summary, title))
    print(describe_run(result))
    plan = trace.meta.environment.get("parallel")
    if plan:
        print(describe_plan(plan, trace.rows, result))
    if args.out:
        write_results(trace.rows, result, args.out)
        print(f"wrote {args.out}")
    if args.timeline:
        write_timeline(trace.rows, result, args.timeline)
        print(f"wrote {args.timeline}")
    return 0


def describe_run(result: SimResult) -> str:
    """Run facts and the share of launches per bound (from two columns: the per-launch table is
    not built for this)."""
    s, bound = result.stats, result.column("bound")
    share = ", ".join(f"{b} {n / len(bound):.0%}" for b, n in bound.value_counts().items())
    return (f"  {s['launches']} launches, {s['simulated']} simulated, {s['memo_hits']} from the memo, "
            f"{s['wall_s']:.2f} s\n  bound: {share}")


def describe_plan(plan: dict[str, Any], rows: pd.DataFrame, result: SimResult) -> str:
    """The trace's parallel plan (docs/parallelism.md) and its collectives' share of the time."""
    from mpsim.traces.schema import COLLECTIVE_OPS

    comm = rows["op"].isin(COLLECTIVE_OPS).to_numpy(dtype=bool)
    times = result.column("time_s").to_numpy()
    share = times[comm].sum() / times.sum() if times.sum() > 0 else 0.0
    micro = plan.get("micro_batches", 1)
    return (f"  parallel plan: tp {plan.get('tp')} x pp {plan.get('pp')}"
            + (f", {micro} micro-batches" if micro != 1 else "") + f" ({plan.get('allreduce')} "
            f"all-reduce); times are one rank's; collectives {times[comm].sum() * 1e3:.3f} ms "
            f"({share:.1%}) in {int(comm.sum())} launches")


def write_results(rows: pd.DataFrame, result: SimResult, path: str | Path) -> Path:
    """Per-launch results with the trace's identity columns, written atomically as Parquet."""
    import pandas as pd

    from mpsim.traces.atomic import atomic_write

    table = pd.concat([rows[list(IDENTITY)], result.launches], axis=1)
    return atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))


def write_timeline(rows: pd.DataFrame, result: SimResult, path: str | Path) -> Path:
    from mpsim.traces.atomic import write_json_atomic
    from mpsim.traces.chrome import chrome_events

    launches = result.launches
    start_us = launches["start_s"].to_numpy() * 1e6
    dur_us = launches["time_s"].to_numpy() * 1e6
    extra = launches[list(TIMELINE_ARGS)].reset_index(drop=True)
    events = chrome_events(rows.reset_index(drop=True), start_us, dur_us,
                           f"{result.model} on {result.hw_name}", extra)
    return write_json_atomic(events, path)
