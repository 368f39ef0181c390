"""Test-session setup shared by every test file.

Triton decides at `@triton.jit` time whether to compile or interpret a kernel, so TRITON_INTERPRET must
be set before anything imports triton: without a CUDA device, the kernels run on the CPU interpreter.
The simulator's on-disk memo goes to a fresh folder per session, so no test reads results a previous
run (or an older simulator) left in ~/.cache/mpsim.
"""

from __future__ import annotations

import os
import tempfile

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ["MPSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="mpsim-test-sim-cache-")
