"""RMSNorm and LayerNorm over the last axis of fp16 rows, computed in fp32, one program per row.

Rows wider than the config's block are walked in chunks (a sum pass, then a normalize pass; LayerNorm
centres in a second pass before the variance, the numerically stable two-pass form). 1/sqrt uses
tl.sqrt_rn and tl.div_rn, IEEE round-to-nearest on every backend.
Reference twins: reference/norms.py::rms_norm_ref and ::layer_norm_ref.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config import rowwise_config
from mpsim.kernels.runtime import on_gpu


@triton.jit
def _rsqrt(x):
    return tl.div_rn(tl.full(x.shape, 1.0, tl.float32), tl.sqrt_rn(x))


@triton.jit
def _mean(total, N):
    # tl.div_rn: Triton's plain fp32 `/` may lower to an approximate division on GPUs.
    return tl.div_rn(total, N * 1.0 + total * 0.0)


@triton.jit
def _row_sum(x_row, N, center, SQUARE: tl.constexpr, BLOCK: tl.constexpr):
    """sum over the row of (x - center) (or of (x - center)^2 when SQUARE), fp32."""
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < N, other=0.0).to(tl.float32)
        c = tl.where(offs < N, x - center, 0.0)
        acc += c * c if SQUARE else c
    return tl.sum(acc, 0)


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, N, eps, stride_x, stride_y, BLOCK: tl.constexpr):
    """y = fp16(x * rsqrt(mean(x^2) + eps) * w)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    r = _rsqrt(_mean(_row_sum(x_row, N, 0.0, True, BLOCK), N) + eps)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < N
        x = tl.load(x_row + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + offs, (x * r * w).to(tl.float16), mask=m)


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, stride_x, stride_y,
                      HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    """y = fp16((x - mean) * rsqrt(var + eps) * w + b), var of the centred values."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    mean = _mean(_row_sum(x_row, N, 0.0, False, BLOCK), N)
    r = _rsqrt(_mean(_row_sum(x_row, N, mean, True, BLOCK), N) + eps)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < N
        x = tl.load(x_row + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * r * w
        if HAS_BIAS:
            y += tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + offs, y.to(tl.float16), mask=m)


def _check_norm_args(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    check_tensor("x", x, (torch.float16,), 2)
    n = int(x.shape[1])
    check_tensor("weight", weight, (torch.float16,), 1, (n,), x.device)
    if bias is not None:
        check_tensor("bias", bias, (torch.float16,), 1, (n,), x.device)
    if x.shape[0] < 1 or n < 1:
        raise ValueError(f"x: expected at least one row and one column, got {tuple(x.shape)}")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of x (M, N) fp16 (unit stride along N) with weight (N,) fp16 -> (M, N) fp16."""
    _check_norm_args(x, weight, None)
    m, n = (int(s) for s in x.shape)
    cfg = rowwise_config("rms_norm_kernel", m, n, on_gpu=on_gpu())
    y = torch.empty((m, n), dtype=torch.float16, device=x.device)

    def launch() -> None:
        rms_norm_kernel[cfg.grid](
            x_ptr=x, w_ptr=weight, y_ptr=y,  # pointers
            N=n, eps=float(eps),  # sizes (and eps)
            stride_x=x.stride(0), stride_y=y.stride(0),  # strides
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "norm", dict(m=m, n=n, k=None), launch)
    return y


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm of x (M, N) fp16 with weight and optional bias (N,) fp16 -> (M, N) fp16."""
    _check_norm_args(x, weight, bias)
    m, n = (int(s) for s in x.shape)
    cfg = rowwise_config("layer_norm_kernel", m, n, on_gpu=on_gpu())
    y = torch.empty((m, n), dtype=torch.float16, device=x.device)

    def launch() -> None:
        layer_norm_kernel[cfg.grid](
            # pointers (without a bias, weight stands in for b_ptr: HAS_BIAS=False never reads it)
            x_ptr=x, w_ptr=weight, b_ptr=bias if bias is not None else weight, y_ptr=y,
            N=n, eps=float(eps),  # sizes (and eps)
            stride_x=x.stride(0), stride_y=y.stride(0),  # strides
            HAS_BIAS=bias is not None, BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "norm", dict(m=m, n=n, k=None), launch)
    return y
