"""`mpsim roofline TRACE --hw H`: the roofline bound of every launch and the run it adds up to.

The same as `mpsim simulate TRACE --hw H --perf-model roofline`, with the per-launch bounds as CSV.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mpsim.commands.common import add_context_arg, add_hw_arg, check_outputs, check_trace_context, hardware

BOUND_COLUMNS = ("launch_id", "t_math_s", "t_mem_s", "t_lower_s", "bound")


def register(sub: Any) -> None:
    p = sub.add_parser("roofline", help="roofline times of a trace on a hardware model")
    p.add_argument("trace", help="trace file (Parquet)")
    add_hw_arg(p)
    p.add_argument("--out", help="write per-launch t_math/t_mem/t_lower as CSV")
    p.add_argument("--timeline", help="write a Chrome trace-event JSON (opens in Perfetto)")
    add_context_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas, pyarrow and the performance models load here, not when the CLI builds its parser
    from mpsim.sim import simulate
    from mpsim.sim.summary import format_summary
    from mpsim.traces.atomic import atomic_write, write_json_atomic
    from mpsim.traces.chrome import chrome_events
    from mpsim.traces.io import read_trace

    check_outputs(args.out, args.timeline)
    trace = read_trace(args.trace)
    check_trace_context(trace.meta, args)
    hw = hardware(args.hw)
    result = simulate(trace, hw, "roofline", cache_dir=None)
    title = f"roofline of {Path(args.trace).name} on {hw.name} ({trace.meta.policy or 'unknown policy'})"
    print(format_summary(result.summary, title))
    if args.out:
        launches = result.launches.reset_index(drop=True)
        rows = trace.rows.reset_index(drop=True)
        nbytes = (rows["bytes_read"] + rows["bytes_written"]).astype(float)
        table = launches[list(BOUND_COLUMNS)].assign(
            arithmetic_intensity=(rows["flops"].astype(float) / nbytes).where(nbytes > 0, 0.0))
        atomic_write(args.out, lambda tmp: table.to_csv(tmp, index=False))
        print(f"wrote {args.out}")
    if args.timeline:
        launches = result.launches.reset_index(drop=True)
        events = chrome_events(trace.rows.reset_index(drop=True), launches["start_s"].to_numpy() * 1e6,
                               launches["time_s"].to_numpy() * 1e6, f"roofline on {hw.name}",
                               launches[["t_math_s", "t_mem_s", "bound"]])
        write_json_atomic(events, args.timeline)
        print(f"wrote {args.timeline}")
    return 0
