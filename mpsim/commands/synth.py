"""`mpsim synth`: write the launch list of a generation as a trace, without running any kernel."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpsim.commands.common import (
    add_context_arg,
    add_engine_arg,
    add_generation_args,
    add_method_arg,
    add_parallel_args,
    check_outputs,
    check_trace_out,
    generation_from_args,
    hardware,
    warn,
)
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.policy import Policy
from mpsim.traces.schema import DEFAULT_ENGINE
from mpsim.workload import Workload, check_context

if TYPE_CHECKING:
    from mpsim.engines import EngineChoice
    from mpsim.traces.columns import Column


def register(sub: Any) -> None:
    p = sub.add_parser("synth", help="synthesize a trace from model + policy + workload")
    add_generation_args(p)
    p.add_argument("--out", required=True, help="trace file to write (Parquet)")
    p.add_argument("--launch-configs", choices=("gpu", "interpreter"), default="gpu",
                   help="record the launch configs of the GPU kernels (default) or of the CPU interpreter")
    p.add_argument("--kv-block", type=int, default=None, help="paged KV block size (default contiguous)")
    add_engine_arg(p, "the synthesized launches")
    add_method_arg(p)
    p.add_argument("--hw", default=None,
                   help="with --config best: the device the configs are tuned for; with --engine: the "
                        "GPU whose architecture and SMs pick the engine's kernels (default hopper, "
                        "132 SMs)")
    p.add_argument("--config", default="heuristic", choices=("heuristic", "best"),
                   help="GEMM launch configs: the launchers' heuristic (default: what a capture "
                        "records) or, with --hw, the candidate the simulator predicts fastest there")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="decode attention launched as under CUDA-graph replay (splits sized for the cache "
                        "capacity), as `mpsim capture --decode graphs` records it")
    add_parallel_args(p)
    p.add_argument("--micro-batches", type=int, default=1, metavar="M",
                   help="split the batch into M micro-batches of batch/M sequences, each with its own "
                        "launches and send/recvs between stages; the simulator runs the --pp stages "
                        "concurrently (docs/parallelism.md; M must divide the batch; default 1)")
    add_context_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_trace_out(args.out)
    spec, policy, workload = generation_from_args(args)
    check_outputs(args.out)
    warn(check_context(spec, workload.prompt_len, workload.gen_len,
                       allow_beyond=args.allow_beyond_context))
    engine = _engine(args)
    if args.config == "best":
        if args.tp != 1 or args.pp != 1 or args.micro_batches != 1:
            raise MpsimInputError("synth --config best tunes the configs of one GPU's trace; drop "
                                  "--tp/--pp/--micro-batches or use --config heuristic")
        path, totals = _write_best(args, spec, policy, workload, engine)
    elif args.hw is not None and args.engine == DEFAULT_ENGINE:
        raise MpsimInputError("synth --hw only applies with --config best or an --engine other than "
                              "mpsim (without them, synthesis records the launchers' heuristic so "
                              "synth == capture holds)")
    else:
        # numpy and pyarrow load here, not when the CLI builds its parser (`mpsim --help`); the
        # columns go to the file as they are, without pandas
        from mpsim.synth import synthesize_columns
        from mpsim.traces.write import write_columns

        columns, meta = synthesize_columns(spec, policy, workload, on_gpu=args.launch_configs == "gpu",
                                           kv_block=args.kv_block, cuda_graphs=args.cuda_graphs,
                                           engine=engine, tp=args.tp, pp=args.pp,
                                           micro_batches=args.micro_batches)
        path = write_columns(columns, meta, args.out)
        totals = (len(columns["launch_id"].na), _total(columns["bytes_read"]), _total(columns["flops"]))
    launches, bytes_read, flops = totals
    kernels = "" if engine.arch is None else f", {engine.name}'s kernels on {engine.arch}"
    if args.tp != 1 or args.pp != 1:
        kernels += f", tp {args.tp} x pp {args.pp}: one rank's launches and the collectives"
    if args.micro_batches != 1:
        kernels += f", {args.micro_batches} micro-batches"
    print(f"wrote {path}: {launches} launches ({spec.name}, {policy}{kernels}, prompt {workload.prompt_len}, "
          f"{workload.gen_len} new tokens, batch {workload.batch}); "
          f"{bytes_read / 1e9:.2f} GB read, {flops / 1e12:.2f} TFLOP")
    return 0


def _engine(args: argparse.Namespace) -> EngineChoice:
    """--engine, on --hw's architecture and SMs when given (else hopper's)."""
    from mpsim.engines import DEFAULT_ARCH, EngineChoice, get_engine

    get_engine(args.engine)  # an unknown name: the error naming the known ones
    if args.engine == DEFAULT_ENGINE:
        return EngineChoice(method=args.quant_method)
    if args.hw is None:
        return EngineChoice(args.engine, DEFAULT_ARCH, method=args.quant_method)
    return EngineChoice.on(args.engine, hardware(args.hw), args.quant_method)


def _total(column: Column) -> int:
    """The sum of a number column (bytes, FLOPs: required, never NA)."""
    return int(column.values.sum())  # type: ignore[union-attr]


def _write_best(args: argparse.Namespace, spec: ModelSpec, policy: Policy, workload: Workload,
                engine: EngineChoice) -> tuple[Path, tuple[int, int, int]]:
    """Synthesize with the GEMM configs the simulator predicts fastest on --hw, and write it:
    mpsim's own kernels' (the default engine), or the autotuned libraries' of another engine (GemLite;
    the other libraries keep their fixed heuristics)."""
    # the simulator and pandas load only when tuning
    from mpsim.sim.best_config import with_autotuned_configs, with_best_gemm_configs
    from mpsim.synth import synthesize
    from mpsim.traces.io import write_trace

    if args.hw is None:
        raise MpsimInputError("synth --config best needs --hw (the device to tune for)")
    if args.launch_configs != "gpu":
        raise MpsimInputError("synth --config best tunes GPU launch configs (not --launch-configs "
                              "interpreter)")
    trace = synthesize(spec, policy, workload, kv_block=args.kv_block, cuda_graphs=args.cuda_graphs,
                       engine=engine)
    tune = with_best_gemm_configs if args.engine == DEFAULT_ENGINE else with_autotuned_configs
    trace, info = tune(trace, hardware(args.hw))
    print(f"model-guided configs for {args.hw}: {info['shapes']} GEMM shapes, "
          f"{info['simulated']} simulated launches, {info['wall_s']:.1f} s")
    rows = trace.rows
    return (write_trace(trace, args.out),
            (len(rows), int(rows["bytes_read"].sum()), int(rows["flops"].sum())))
