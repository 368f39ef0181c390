"""Greedy sampling: the argmax of each row of logits, ties resolved to the lowest index.

One program per row walks the vocabulary in chunks: each chunk's max and the lowest index reaching
it, then a strictly-greater update of the running best, so an earlier (lower) index wins every tie.
Comparisons are exact (fp16 widened to fp32), so the result is bit-identical to
reference/sampling.py::argmax_ref. NaN logits are not supported (no total order).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config import rowwise_config
from mpsim.kernels.runtime import on_gpu


@triton.jit
def argmax_kernel(x_ptr, y_ptr, V, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full((), float("-inf"), tl.float32)
    best_i = tl.full((), 0, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + offs, mask=offs < V,
                    other=float("-inf")).to(tl.float32)
        chunk_max = tl.max(x, 0)
        chunk_i = tl.min(tl.where((x == chunk_max) & (offs < V), offs, V), 0)
        better = chunk_max > best
        best_i = tl.where(better, chunk_i, best_i)
        best = tl.where(better, chunk_max, best)
    tl.store(y_ptr + row, best_i.to(tl.int64))


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """logits (M, V) fp16 or fp32 (unit stride along V) -> (M,) int64 token ids."""
    check_tensor("logits", logits, (torch.float16, torch.float32), 2)
    m, v = (int(s) for s in logits.shape)
    if m < 1 or v < 1:
        raise ValueError(f"logits: expected at least one row and one column, got {(m, v)}")
    cfg = rowwise_config("argmax_kernel", m, v, on_gpu=on_gpu())
    y = torch.empty(m, dtype=torch.int64, device=logits.device)

    def launch() -> None:
        argmax_kernel[cfg.grid](
            x_ptr=logits, y_ptr=y,  # pointers
            V=v,  # sizes
            stride_x=logits.stride(0),  # strides
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "sample", dict(m=m, n=v, k=None), launch)
    return y
