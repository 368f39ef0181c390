"""The front door: `mpsim <command> ...`. Each command lives in mpsim/commands/<family>.py."""

from __future__ import annotations

import argparse
import errno
import gc
import io
import os
import shutil
import sys
from collections.abc import Sequence

from mpsim.commands import (
    demo,
    engine,
    evaluate,
    info,
    op,
    plot,
    quantize,
    roofline,
    serve,
    simulate,
    sweep,
    synth,
    validate,
)
from mpsim.errors import USER_ERRORS

# Command families, in the order `mpsim --help` lists them. Each module has `register(subparsers)`.
COMMANDS = (info, synth, roofline, sweep, plot, demo, simulate, serve, op, validate, engine, quantize,
            evaluate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpsim",
        description="Compare mixed-precision LLM inference policies on real and modeled hardware.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def _interpreter_without_gpu() -> None:
    """Without an NVIDIA driver, Triton kernels can only run on its CPU interpreter, and Triton reads
    TRITON_INTERPRET when kernels are defined, so set it before any command imports them (the kernels
    say on stderr that they run interpreted when they first run; a user's explicit setting wins)."""
    if shutil.which("nvidia-smi") is None:
        os.environ.setdefault("TRITON_INTERPRET", "1")


# A command's process allocates some 60k long-lived objects (the modules of numpy, pandas, pyarrow)
# and little cyclic garbage. Collecting the youngest generation every 50k allocations instead of 700
# spares ~180 collections over the imports (~0.05 s); what a command leaves in cycles is small.
COMMAND_GC_THRESHOLD = (50_000, 10, 10)

# The OSErrors that mean the machine cannot take a write (full disk, file-size limit, quota, read-only
# file system): one clear line naming the file, not a traceback, wherever the write was.
DISK_FULL_OR_READ_ONLY = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. `argv` None: this process's own command line (the console script, `python -m
    mpsim.cli`), a process that ends when the command does; callers in a longer process (tests) pass
    a list and leave the garbage collector as it is."""
    own_process = argv is None
    if own_process:
        gc.set_threshold(*COMMAND_GC_THRESHOLD)
        _arrow_allocates_with_malloc()
    try:
        return _run(argv)
    finally:
        if own_process:
            _before_exit()


def _arrow_allocates_with_malloc() -> None:
    """Arrow's default pool (mimalloc) keeps the Parquet decoder's freed scratch memory even when
    asked to hand it back (~50 MB reading a 794k-launch trace); malloc gives it to the next
    allocations (numpy's). Arrow reads the setting when it first allocates, so before any command
    imports pyarrow; a user's explicit setting wins."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _before_exit() -> None:
    """The interpreter's exit walks every tracked object in its collections (~0.13 s with pandas and
    pyarrow loaded); frozen objects are skipped there and are still freed by reference counting.
    Files are closed by then (every writer is atomic: mpsim.traces.atomic) and stdout/stderr are
    flushed at exit as usual. Triton's extension (nanobind) checks at exit that its objects were
    freed, which takes those collections: a command that loaded it (the engine's) keeps them."""
    if "triton" not in sys.modules:
        gc.freeze()


def _run(argv: Sequence[str] | None) -> int:
    _interpreter_without_gpu()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `mpsim ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except USER_ERRORS as exc:  # bad input: one clear line, no traceback
        print(f"mpsim: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in DISK_FULL_OR_READ_ONLY:
            raise
        # A write outside mpsim's own writers (which name the output the user gave) failed for want of
        # room or permission, e.g. numba's cache of a function compiled during the run: name that file.
        from mpsim.traces.atomic import REASONS

        print(f"mpsim: error: cannot write {_file_written(exc)}: {REASONS[exc.errno]}", file=sys.stderr)
        return 2


def _file_written(exc: OSError) -> str:
    """The file a failed write was writing: the error's own filename, else the innermost file object
    in the failing frames (a `write` on an open file names none)."""
    if exc.filename:
        return str(exc.filename)
    tb, name = exc.__traceback__, None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            file_name = getattr(value, "name", None) if isinstance(value, io.IOBase) else None
            if isinstance(file_name, str):
                name = file_name
        tb = tb.tb_next
    return name or "a file (its name is unknown)"


if __name__ == "__main__":
    sys.exit(main())
