"""PyTorch's vectorized elementwise add (`torch_add`, Vidur's measured residual add): kernel name,
launch config and row builder (`framework_op_row(TORCH_ADD, ...)`); mpsim/sim/gpu/library/torch.py
prices it.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.library.rows import Row, apply_config

TORCH_ADD = "torch_add"
KERNELS = (TORCH_ADD,)
OPS = {TORCH_ADD: "other"}


def add_config(tokens: int) -> LaunchConfig:
    """PyTorch's vectorized elementwise add: a grid-stride loop of 128-thread blocks."""
    threads = max(32, 128)
    return LaunchConfig(TORCH_ADD, (tokens,), None, threads, None, cdiv(threads, 32), 1)


def rowwise_row(kernel: str, tokens: int, hidden: int, *, heads: int, kv_heads: int,
                head_dim: int) -> Row:
    """A `torch_add` row over `hidden` wide rows (op other)."""
    row: Row = {"op": OPS[kernel], "module": kernel, "m": tokens, "n": hidden, "k": None}
    return apply_config(row, add_config(tokens))
