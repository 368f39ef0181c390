"""MLP activations on fp16 rows, computed in fp32: SwiGLU's SiLU-mul and the tanh-approximate GELU.

silu_mul: x (M, 2F) holds the gate in its first F columns and the up projection in the last F (one
fused gate_up GEMM), y = silu(gate) * up. gelu: "gelu_new", 0.5 x (1 + tanh(c (x + a x^3))), computed
through the identity 0.5 (1 + tanh(t)) = 1 / (1 + exp(-2t)), which needs no tanh (libdevice is not
available under the interpreter) and does not cancel for large negative t.
Reference twins: reference/activations.py::silu_mul_ref and ::gelu_ref.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config import rowwise_config
from mpsim.kernels.runtime import on_gpu
from mpsim.opspec import GELU_A, GELU_C


@triton.jit
def _sigmoid_times(x, t):
    """x / (1 + exp(-t)), with an IEEE division (plain `/` may be approximate on GPUs)."""
    return tl.div_rn(x, 1.0 + tl.exp(-t))


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, F, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, F, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < F
        g = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
        up = tl.load(x_ptr + row * stride_x + F + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + offs, (_sigmoid_times(g, g) * up).to(tl.float16), mask=m)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, N, stride_x, stride_y, c, a, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < N
        x = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
        t = c * (x + a * (x * x * x))
        tl.store(y_ptr + row * stride_y + offs, _sigmoid_times(x, 2.0 * t).to(tl.float16), mask=m)


def _check_rows(name: str, x: torch.Tensor) -> tuple[int, int]:
    check_tensor(name, x, (torch.float16,), 2)
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{name}: expected at least one row and one column, got {tuple(x.shape)}")
    return int(x.shape[0]), int(x.shape[1])


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """x (M, 2F) fp16 = [gate | up] -> silu(gate) * up, (M, F) fp16."""
    m, width = _check_rows("x", x)
    if width % 2:
        raise ValueError(f"x: expected an even number of columns [gate | up], got {tuple(x.shape)}")
    f = width // 2
    # Config width = the input row (2F), as synthesis sizes it (m, n = F, k = 2F).
    cfg = rowwise_config("silu_mul_kernel", m, width, on_gpu=on_gpu())
    y = torch.empty((m, f), dtype=torch.float16, device=x.device)

    def launch() -> None:
        silu_mul_kernel[cfg.grid](
            x_ptr=x, y_ptr=y,  # pointers
            F=f,  # sizes
            stride_x=x.stride(0), stride_y=y.stride(0),  # strides
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "act", dict(m=m, n=f, k=width), launch)
    return y


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Tanh-approximate GELU of x (M, N) fp16 -> (M, N) fp16."""
    m, n = _check_rows("x", x)
    cfg = rowwise_config("gelu_kernel", m, n, on_gpu=on_gpu())
    y = torch.empty((m, n), dtype=torch.float16, device=x.device)

    def launch() -> None:
        gelu_kernel[cfg.grid](
            x_ptr=x, y_ptr=y,  # pointers
            N=n,  # sizes
            stride_x=x.stride(0), stride_y=y.stride(0),  # strides
            c=GELU_C, a=GELU_A,  # the op's coefficients (mpsim/opspec.py)
            BLOCK=cfg.block_n,  # constexprs
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "act", dict(m=m, n=n, k=n), launch)
    return y
