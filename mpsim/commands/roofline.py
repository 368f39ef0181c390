"""`mpsim roofline TRACE --hw H`: the roofline bound of every launch and the run it adds up to."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mpsim.commands.common import add_hw_arg, hardware
from mpsim.sim.roofline import roofline
from mpsim.sim.summary import format_summary, summarize
from mpsim.traces.chrome import back_to_back, chrome_events, write_json_atomic
from mpsim.traces.io import read_trace


def register(sub: Any) -> None:
    p = sub.add_parser("roofline", help="roofline times of a trace on a hardware model")
    p.add_argument("trace", help="trace file (Parquet)")
    add_hw_arg(p)
    p.add_argument("--out", help="write per-launch t_math/t_mem/t_lower as CSV")
    p.add_argument("--timeline", help="write a Chrome trace-event JSON (opens in Perfetto)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    trace = read_trace(args.trace)
    hw = hardware(args.hw)
    bounds = roofline(trace.rows, hw)
    workload = trace.meta.workload
    batch, gen_len = int(workload.get("batch", 1)), int(workload.get("gen_len", 1))
    summary = summarize(trace.rows, bounds["t_lower_s"].to_numpy(), batch, gen_len)
    title = f"roofline of {Path(args.trace).name} on {hw.name} ({trace.meta.policy or 'unknown policy'})"
    print(format_summary(summary, title))
    if args.out:
        bounds.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    if args.timeline:
        dur_us = bounds["t_lower_s"].to_numpy() * 1e6
        events = chrome_events(trace.rows, back_to_back(dur_us), dur_us, f"roofline on {hw.name}",
                               bounds[["t_math_s", "t_mem_s", "bound"]])
        write_json_atomic(events, args.timeline)
        print(f"wrote {args.timeline}")
    return 0
