"""Test-session setup shared by every test file.

Triton decides at `@triton.jit` time whether to compile or interpret a kernel, so TRITON_INTERPRET must
be set before anything imports triton: without a CUDA device, the kernels run on the CPU interpreter.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
