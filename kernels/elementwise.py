"""Residual add and embedding gather: the exact row-wise ops of a decoder (no rounding choices).

residual_add: fp16(fp32(a) + fp32(b)); fp32 holds 24 significand bits >= 2*11 + 2, so rounding the
fp32 sum to fp16 equals rounding the exact sum once: bit-identical to any correct fp16 add.
embedding: out[i] = table[ids[i]], a copy. Reference twins: reference/elementwise.py::residual_add_ref
and ::embedding_ref.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config import rowwise_config
from mpsim.kernels.runtime import on_gpu


@triton.jit
def residual_add_kernel(a_ptr, b_ptr, y_ptr, N, stride_a, stride_b, stride_y,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < N
        a = tl.load(a_ptr + row * stride_a + offs, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + row * stride_b + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + offs, (a + b).to(tl.float16), mask=m)


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, y_ptr, N, stride_t, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src = table_ptr + tl.load(ids_ptr + row).to(tl.int64) * stride_t
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < N
        tl.store(y_ptr + row.to(tl.int64) * stride_y + offs, tl.load(src + offs, mask=m), mask=m)


def residual_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b for fp16 (M, N) rows (unit stride along N) -> a new (M, N) fp16 tensor."""
    check_tensor("a", a, (torch.float16,), 2)
    check_tensor("b", b, (torch.float16,), 2, tuple(a.shape), a.device)
    m, n = (int(s) for s in a.shape)
    if m < 1 or n < 1:
        raise ValueError(f"a: expected at least one row and one column, got {tuple(a.shape)}")
    cfg = rowwise_config("residual_add_kernel", m, n, on_gpu=on_gpu())
    y = torch.empty((m, n), dtype=torch.float16, device=a.device)

    def launch() -> None:
        residual_add_kernel[cfg.grid](
            a_ptr=a, b_ptr=b, y_ptr=y,  # pointers
            N=n,  # sizes
            stride_a=a.stride(0), stride_b=b.stride(0), stride_y=y.stride(0),  # strides
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "other", dict(m=m, n=n, k=None), launch)
    return y


def embedding(ids: torch.Tensor, table: torch.Tensor, *, check_ids: bool = True) -> torch.Tensor:
    """Rows of table (V, N) fp16 picked by ids (M,) int64/int32 -> (M, N) fp16.

    check_ids verifies 0 <= ids < V first (one host sync on a GPU; a kernel cannot raise). Pass
    False only for ids that are in range by construction (an argmax over V logits).
    """
    check_tensor("ids", ids, (torch.int64, torch.int32), 1)
    check_tensor("table", table, (torch.float16,), 2, None, ids.device)
    m, (v, n) = int(ids.shape[0]), (int(s) for s in table.shape)
    if m < 1:
        raise ValueError("ids: expected at least one token id, got none")
    if check_ids:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= v:
            raise ValueError(f"ids: expected token ids in [0, {v}) (the table's rows), "
                             f"got values in [{lo}, {hi}]")
    cfg = rowwise_config("embedding_kernel", m, n, on_gpu=on_gpu())
    y = torch.empty((m, n), dtype=torch.float16, device=ids.device)

    def launch() -> None:
        embedding_kernel[cfg.grid](
            ids_ptr=ids, table_ptr=table, y_ptr=y,  # pointers
            N=n,  # sizes
            stride_t=table.stride(0), stride_y=y.stride(0),  # strides
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "embed", dict(m=m, n=n, k=None), launch)
    return y
