"""`mpsim synth`: write the launch list of a generation as a trace, without running any kernel."""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.commands.common import add_context_arg, add_generation_args, generation_from_args, warn
from mpsim.workload import check_context


def register(sub: Any) -> None:
    p = sub.add_parser("synth", help="synthesize a trace from model + policy + workload")
    add_generation_args(p)
    p.add_argument("--out", required=True, help="trace file to write (Parquet)")
    p.add_argument("--launch-configs", choices=("gpu", "interpreter"), default="gpu",
                   help="record the launch configs of the GPU kernels (default) or of the CPU interpreter")
    p.add_argument("--kv-block", type=int, default=None, help="paged KV block size (default contiguous)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="decode attention launched as under CUDA-graph replay (splits sized for the cache "
                        "capacity), as `mpsim capture --decode graphs` records it")
    add_context_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # numpy, pandas and pyarrow load here, not when the CLI builds its parser (`mpsim --help`)
    from mpsim.synth import synthesize
    from mpsim.traces.io import write_trace

    spec, policy, workload = generation_from_args(args)
    warn(check_context(spec, workload.prompt_len, workload.gen_len,
                       allow_beyond=args.allow_beyond_context))
    trace = synthesize(spec, policy, workload, on_gpu=args.launch_configs == "gpu",
                       kv_block=args.kv_block, cuda_graphs=args.cuda_graphs)
    path = write_trace(trace, args.out)
    rows = trace.rows
    print(f"wrote {path}: {len(rows)} launches ({spec.name}, {policy}, prompt {workload.prompt_len}, "
          f"{workload.gen_len} new tokens, batch {workload.batch}); "
          f"{rows['bytes_read'].sum() / 1e9:.2f} GB read, {rows['flops'].sum() / 1e12:.2f} TFLOP")
    return 0
