"""Where mpsim's Triton kernels run: a CUDA GPU, or the Triton interpreter on CPU (said, never silent).

Triton decides at `@triton.jit` time whether a kernel is compiled or interpreted, from the environment
variable TRITON_INTERPRET; tests/conftest.py and the Makefile set it when no CUDA device is present.
These helpers tell the launchers which of the two is in force, and refuse to run when neither is.
"""

from __future__ import annotations

import functools
import os
import sys

import torch

INTERPRET_ENV = "TRITON_INTERPRET"


def interpreter_enabled() -> bool:
    """True when TRITON_INTERPRET asks Triton to run kernels on the CPU interpreter."""
    return os.environ.get(INTERPRET_ENV, "0").strip().lower() in ("1", "true", "yes", "on")


def on_gpu() -> bool:
    """True when kernels compile for a CUDA device (CUDA present and the interpreter off)."""
    return torch.cuda.is_available() and not interpreter_enabled()


def capturing() -> bool:
    """True while the current CUDA stream is capturing a graph: no host sync (`.item()`) may happen
    then (CUDA fails the capture), so launchers leave out the columns that need one."""
    return torch.cuda.is_available() and bool(torch.cuda.is_current_stream_capturing())


def device() -> torch.device:
    """The device kernel inputs must live on: the current CUDA device, or the CPU under the interpreter.

    Raises RuntimeError when there is no CUDA device and the interpreter is off, since Triton could
    then neither compile nor interpret the kernels.
    """
    if on_gpu():
        return torch.device("cuda", torch.cuda.current_device())
    if not interpreter_enabled():
        raise RuntimeError(
            "no CUDA device and TRITON_INTERPRET is not 1: mpsim's Triton kernels cannot run. "
            "Set TRITON_INTERPRET=1 before importing mpsim.kernels to use the CPU interpreter."
        )
    _announce_interpreter()
    return torch.device("cpu")


@functools.cache
def _announce_interpreter() -> None:
    """Say once per process that kernels run on the CPU interpreter (slow, for correctness only)."""
    reason = "no CUDA device" if not torch.cuda.is_available() else "TRITON_INTERPRET=1"
    print(
        f"mpsim.kernels: {reason}; Triton kernels run on the CPU interpreter "
        "(TRITON_INTERPRET=1): correct but slow, timings are host wall time",
        file=sys.stderr,
    )
