"""Argument helpers shared by the commands: workloads, hardware, models, policies."""

from __future__ import annotations

import argparse

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec, get_model
from mpsim.policy import Policy, parse_policy
from mpsim.workload import Workload


def add_generation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="preset name (see `mpsim models`) or a HF config.json")
    p.add_argument("--policy", required=True, help="precision policy, e.g. fp16, w4, ap4-4@85-3+kv8")
    p.add_argument("--prompt-len", type=int, required=True, help="prompt tokens per sequence")
    p.add_argument("--gen-len", type=int, required=True, help="new tokens per sequence")
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")


def generation_from_args(args: argparse.Namespace) -> tuple[ModelSpec, Policy, Workload]:
    return (get_model(args.model), parse_policy(args.policy),
            Workload(args.prompt_len, args.gen_len, args.batch))


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
