"""fp16-weight GEMV/GEMM in Triton, y = x @ W.T (+ b): the like-for-like baseline of the quantized kernels.

Same tiling, split-K and epilogue as kernels/gemm_group.py and kernels/gemm_anyprec.py, only the weight
tile is a plain fp16 load, so a speedup measured between them is the format's, not the kernel's.
Reference twin: reference/gemm_fp16.py::gemm_fp16_ref.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels import runtime
from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    check_config,
    check_weight,
    gemv_acc,
    gemv_total,
    grouped_tile,
    load_x_gemv,
    load_x_tile,
    loop_stages,
    mma_rows,
    run_gemm,
    splitk_finish,
    store_output,
)
from mpsim.kernels.launch_config import LaunchConfig


@triton.jit
def _fp16_w_tile(w_ptr, offs_n, k0, N, K, stride_wn, BLOCK_K: tl.constexpr):
    """W[offs_n, k0:k0+BLOCK_K] as fp16 (BLOCK_N, BLOCK_K), zero outside N x K."""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    return tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :], mask=mask, other=0.0)


@triton.jit
def gemv_fp16_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                     M, N, K, K_PER_SPLIT,
                     stride_xm, stride_wn, stride_om,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, LOOP_STAGES: tl.constexpr = 0):
    """Few rows: program (n tile, K split) streams its BLOCK_N weight rows over its share of K.
    LOOP_STAGES > 0 (the one-row GPU configs' loop_stages): the K loop's loads pipelined that deep
    (gemm_common.loop_stages); 0: Triton's default (only the 16-row path's loads feed tl.dot)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=loop_stages(LOOP_STAGES)):
        w = _fp16_w_tile(w_ptr, offs_n, k0, N, K, stride_wn, BLOCK_K)
        x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
        acc = mma_rows(w, x, acc, BLOCK_M)
    splitk_finish(gemv_total(acc, BLOCK_M), out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)


@triton.jit
def gemm_fp16_kernel(x_ptr, w_ptr, bias_ptr, out_ptr,
                     M, N, K,
                     stride_xm, stride_wn, stride_om,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Many rows: one program per (BLOCK_M x BLOCK_N) output tile, full K, tensor-core dot."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        w = _fp16_w_tile(w_ptr, offs_n, k0, N, K, stride_wn, BLOCK_K)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = tl.dot(w, tl.trans(x), acc)
    store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)


_KERNELS = {"gemv_fp16_kernel": gemv_fp16_kernel, "gemm_fp16_kernel": gemm_fp16_kernel}


def gemm_fp16(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
              config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ weight.T (+ bias) with x fp16 (M, K), weight fp16 (N, K), bias fp16 (N,) -> fp16 (M, N).

    `config` overrides the choice (gemm_common.run_gemm: the heuristic, or autotuning on a GPU);
    tests use it to force split-K widths.
    """
    dev = runtime.device()
    x = check_activations(x, dev)
    weight = check_weight("weight", weight, torch.float16, 2, dev)
    m, k = x.shape
    n = weight.shape[0]
    if weight.shape[1] != k:
        raise ValueError(f"weight: expected shape (N, {k}) to match x's K={k}, "
                         f"got {tuple(weight.shape)}")
    bias = check_bias(bias, n, dev)
    out = torch.empty((m, n), dtype=torch.float16, device=x.device)
    record = dict(m=m, n=n, k=k, w_format="fp16", w_bits=16, group_size=None, a_dtype="fp16",
                  out_dtype="fp16", bias=bias is not None)
    args = dict(
        # pointers
        x_ptr=x, w_ptr=weight, bias_ptr=bias, out_ptr=out,
        # sizes
        M=m, N=n, K=k,
        # strides
        stride_xm=x.stride(0), stride_wn=weight.stride(0), stride_om=out.stride(0),
        # constexprs
        HAS_BIAS=bias is not None,
    )
    run_gemm(gemv_fp16_kernel, gemm_fp16_kernel, config, record, x.device, k,
             lambda cfg: check_config(cfg, tuple(_KERNELS), m, n), **args)
    return out
