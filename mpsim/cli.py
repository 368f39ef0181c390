"""The front door: `mpsim <command> ...`. Each command lives in mpsim/commands/<family>.py."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Sequence

from mpsim.errors import USER_ERRORS

# Command families, in the order `mpsim --help` lists them. Each module has `register(subparsers)`.
COMMAND_MODULES: tuple[str, ...] = (
    "mpsim.commands.info",
    "mpsim.commands.synth",
    "mpsim.commands.roofline",
    "mpsim.commands.sweep",
    "mpsim.commands.plot",
    "mpsim.commands.demo",
    "mpsim.commands.simulate",
    "mpsim.commands.op",
    "mpsim.commands.validate",
    "mpsim.commands.engine",
    "mpsim.commands.evaluate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpsim",
        description="Compare mixed-precision LLM inference policies on real and modeled hardware.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _interpreter_without_gpu() -> None:
    """Without an NVIDIA driver, Triton kernels can only run on its CPU interpreter, and Triton reads
    TRITON_INTERPRET when kernels are defined, so set it before any command imports them (the kernels
    say on stderr that they run interpreted when they first run; a user's explicit setting wins)."""
    if shutil.which("nvidia-smi") is None:
        os.environ.setdefault("TRITON_INTERPRET", "1")


def main(argv: Sequence[str] | None = None) -> int:
    _interpreter_without_gpu()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:  # bad input: one clear line, no traceback
        print(f"mpsim: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
