"""Argument helpers shared by the commands: workloads, hardware, models, policies.

Building the parser must stay light (`mpsim --help`, `mpsim op` in well under a second): this module
and every command module import at the top only what is light (argparse, the core's model, policy
and workload specs, the hardware loader); a command imports the heavy parts (numpy, pandas, pyarrow,
SimPy, matplotlib, the engine's torch) inside the function that runs it, where it says why.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mpsim import limits
from mpsim.errors import MpsimInputError, warn
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec, get_model
from mpsim.policy import Policy, parse_policy
from mpsim.traces.schema import DEFAULT_ENGINE
from mpsim.workload import BEYOND_CONTEXT_FLAG, Workload, check_context

if TYPE_CHECKING:
    from mpsim.traces.trace import Trace, TraceMeta

# The shipped performance models (the keys of mpsim.sim.PERF_MODELS), spelled here so that building
# the parser does not import the simulator (pandas, SimPy); tests/commands/test_startup.py holds the
# two equal.
PERF_MODEL_NAMES = ("sim", "roofline")
DEFAULT_CACHE = "default"  # mpsim.sim.DEFAULT_CACHE: $MPSIM_CACHE_DIR or ~/.cache/mpsim/sim


def add_generation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="preset name (see `mpsim models`) or a HF config.json")
    p.add_argument("--policy", required=True, help="precision policy, e.g. fp16, w4, ap4-4@85-3+kv8")
    p.add_argument("--prompt-len", type=int, required=True, help="prompt tokens per sequence")
    p.add_argument("--gen-len", type=int, required=True, help="new tokens per sequence")
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")


def add_context_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(BEYOND_CONTEXT_FLAG, action="store_true",
                   help="run a workload whose prompt + new tokens exceed the model's context length "
                        "(`mpsim models` lists them) with a warning instead of an error")


def check_counts(args: argparse.Namespace, **least: int) -> None:
    """Whole-number options checked before any work: each `name` (args.name, --name) >= its least
    value and within the stated limit on one dimension (mpsim/limits.py); None means not given."""
    for name, low in least.items():
        value = getattr(args, name)
        option = "--" + name.replace("_", "-")
        if value is None:
            continue
        if value < low:
            raise MpsimInputError(f"{option} {value}: expected a whole number >= {low}")
        limits.SHAPE_DIM.check(value, option)


def check_trace_out(path: str) -> None:
    """A trace is written as Parquet: `--out` must say so (a .csv name would hold Parquet bytes)."""
    if not path.lower().endswith(".parquet"):
        raise MpsimInputError(f"--out {path}: a trace is written as Parquet; name the file *.parquet")


def check_trace_context(meta: TraceMeta, args: argparse.Namespace) -> None:
    """The context rule for a trace's model and workload (from its metadata, when it has them)."""
    wl = meta.workload
    if meta.model and "prompt_len" in wl and "gen_len" in wl:
        warn(check_context(meta.model, int(wl["prompt_len"]), int(wl["gen_len"]),
                           allow_beyond=args.allow_beyond_context))


def generation_from_args(args: argparse.Namespace) -> tuple[ModelSpec, Policy, Workload]:
    return (get_model(args.model), parse_policy(args.policy),
            Workload(args.prompt_len, args.gen_len, args.batch))


def add_engine_arg(p: argparse.ArgumentParser, what: str = "the launches") -> None:
    p.add_argument("--engine", default=DEFAULT_ENGINE, metavar="NAME",
                   help=f"whose kernels run {what}: an engine of `mpsim engines` (default "
                        f"{DEFAULT_ENGINE}: mpsim's own, what capture runs)")


def add_method_arg(p: argparse.ArgumentParser) -> None:
    """--quant-method: the checkpoint's quantization method, where the engine dispatches on it."""
    from mpsim.engines.files import QUANT_METHODS

    p.add_argument("--quant-method", default=None, choices=QUANT_METHODS,
                   help="the checkpoint's quantization method, for engines that pick their weight-"
                        "only kernel by it (docs/engines.md: vllm gptq -> Machete on Hopper, awq / "
                        "rtn -> Marlin; trtllm awq adds the pre-quant scale launch; sglang gemlite); "
                        "default: the engine file's first choice")


def add_parallel_args(p: argparse.ArgumentParser) -> None:
    """--tp and --pp: the parallel plan (mpsim/parallel.py, docs/parallelism.md)."""
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help="tensor-parallel degree: GPUs per group, Megatron-style (QKV, gate/up column-"
                        "parallel; O, down row-parallel with an all-reduce after each; default 1)")
    p.add_argument("--pp", type=int, default=1, metavar="N",
                   help="pipeline stages: the layers split over N stages, activations sent between "
                        "them (default 1)")


def add_reprice_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default=None, metavar="NAME",
                   help="the engine whose kernels to price (`mpsim engines`); without --reprice it "
                        "must be the trace's own (rows are priced as the kernels they name)")
    p.add_argument("--reprice", action="store_true",
                   help="rebuild every row as --engine's kernels on --hw before pricing")


def engine_rows(trace: Trace, hw: HardwareSpec, args: argparse.Namespace) -> Trace:
    """The trace to price: as it is, or (--reprice) rebuilt as --engine's kernels on `hw`. The
    simulator prices each row as the kernel it names: never another engine's unless asked."""
    trace_path = args.trace
    from mpsim.engines import EngineChoice, get_engine

    if not args.reprice:
        if args.engine is not None and args.engine != trace.meta.engine:
            get_engine(args.engine)  # an unknown name: the error naming the known ones
            raise MpsimInputError(f"{trace_path} holds the kernels of engine {trace.meta.engine!r}; to "
                                  f"price its rows as the kernels of {args.engine!r}, add --reprice")
        return trace
    if args.engine is None:
        raise MpsimInputError("--reprice rebuilds the rows as another engine's kernels: name it "
                              "with --engine")
    from mpsim.engines.reprice import reprice

    trace = reprice(trace, EngineChoice.on(args.engine, hw))
    print(f"repriced {len(trace.rows)} launches as {args.engine}'s kernels on "
          f"{trace.meta.environment['engine_arch']}")
    return trace


def add_hw_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", required=True,
                   help="a shipped hardware name (see `mpsim hw list`) or the path of a YAML file")


def hardware(name_or_path: str) -> HardwareSpec:
    return load_hardware(name_or_path)


MODEL_HELP = ("tiny (the shipped byte-level model), or a model folder: HF, written by `mpsim quantize` or "
              "by `mpsim train-tiny --out`")


def add_prompt_args(p: argparse.ArgumentParser) -> None:
    """How prompts are posed: a task template and an optional chat template (mpsim.engine.prompts)."""
    from mpsim.engine.chat import BUILTIN_TEMPLATES
    from mpsim.engine.tasks import TASKS

    p.add_argument("--task", choices=tuple(TASKS), default="plain",
                   help="task template for each prompt (PMPD's tasks: cnn-dm, dialogsum, iwslt, mt-bench)")
    p.add_argument("--chat", nargs="?", const="auto", default=None, metavar="NAME",
                   help="wrap prompts in the chat template: the folder's own (--chat alone) or a built-in "
                        f"({', '.join(BUILTIN_TEMPLATES)})")


def check_outputs(*files: str | None, folder: str | None = None) -> None:
    """Before any work: each output file (and the output `folder`) given can be written where it is
    named (no file in the way, the right kind if it exists, a writable file system)."""
    from mpsim.traces.atomic import check_output  # pyarrow loads with it: not when parsing

    for path in files:
        if path:
            check_output(path)
    if folder:
        check_output(folder, folder=True)
