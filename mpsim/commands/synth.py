"""`mpsim synth`: write the launch list of a generation as a trace, without running any kernel."""

from __future__ import annotations

import argparse
from typing import Any

from mpsim.commands.common import add_context_arg, add_generation_args, generation_from_args, hardware, warn
from mpsim.errors import MpsimInputError
from mpsim.workload import check_context


def register(sub: Any) -> None:
    p = sub.add_parser("synth", help="synthesize a trace from model + policy + workload")
    add_generation_args(p)
    p.add_argument("--out", required=True, help="trace file to write (Parquet)")
    p.add_argument("--launch-configs", choices=("gpu", "interpreter"), default="gpu",
                   help="record the launch configs of the GPU kernels (default) or of the CPU interpreter")
    p.add_argument("--kv-block", type=int, default=None, help="paged KV block size (default contiguous)")
    p.add_argument("--hw", default=None, help="with --config best: the device the configs are tuned for")
    p.add_argument("--config", default="heuristic", choices=("heuristic", "best"),
                   help="GEMM launch configs: the launchers' heuristic (default: what a capture "
                        "records) or, with --hw, the candidate the simulator predicts fastest there")
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
    if args.config == "best":
        from mpsim.sim.best_config import with_best_gemm_configs  # the simulator, only when tuning

        if args.hw is None:
            raise MpsimInputError("synth --config best needs --hw (the device to tune for)")
        if args.launch_configs != "gpu":
            raise MpsimInputError("synth --config best tunes GPU launch configs (not --launch-configs "
                                  "interpreter)")
        trace, info = with_best_gemm_configs(trace, hardware(args.hw))
        print(f"model-guided configs for {args.hw}: {info['shapes']} GEMM shapes, "
              f"{info['simulated']} simulated launches, {info['wall_s']:.1f} s")
    elif args.hw is not None:
        raise MpsimInputError("synth --hw only applies with --config best (without it, synthesis "
                              "records the launchers' heuristic so synth == capture holds)")
    path = write_trace(trace, args.out)
    rows = trace.rows
    print(f"wrote {path}: {len(rows)} launches ({spec.name}, {policy}, prompt {workload.prompt_len}, "
          f"{workload.gen_len} new tokens, batch {workload.batch}); "
          f"{rows['bytes_read'].sum() / 1e9:.2f} GB read, {rows['flops'].sum() / 1e12:.2f} TFLOP")
    return 0
