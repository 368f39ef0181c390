"""FP8 W8A8 GEMM in Triton: y = fp16(fl(fl(acc * sw[n]) * sa[m]) + b), acc = sum_k qa[m, k] qw[n, k].

qa: e4m3 activation codes with one fp32 scale per token (kernels/fp8_act_quant.py); qw: e4m3 weight
codes with one fp32 scale per tensor or per output row (reference/fp8_quant.py's quantize_fp8).
Both code tiles are bitcast from uint8 to tl.float8e4nv and multiplied by `tl.dot` on fp8 operands
(sm_89+: Ada mma.sync e4m3, Hopper wgmma ...e4m3.e4m3), accumulated in fp32. The accumulator is
(BLOCK_N, BLOCK_M), weights the dot's left operand ("swap AB", as kernels/gemm_common.py explains),
both operands K-major, which fp8 wgmma requires.

Hopper's fp8 wgmma accumulates with fewer than fp32's bits (DeepSeek-V3 technical report, 3.3.2:
"around 14 bits" on H800); Triton by default (sm_90, max_num_imprecise_acc_default = 2^30,
triton/backends/nvidia/compiler.py) never promotes. The kernel passes max_num_imprecise_acc =
BLOCK_K, so each BLOCK_K slice is added into a full fp32 accumulator, as DeepGEMM / CUTLASS promote
every 128 (the GPU config's BLOCK_K is 128).

One kernel for every M: grid (M tiles x N tiles, SPLIT_K); a split's partial is scaled (the epilogue's
two products) before the split-K sum of kernels/gemm_common.splitk_finish, which adds the bias and
writes fp16. Few rows (M <= 16) pad to 16 activation rows and split K; more rows use 64 x 64 or
128 x 128 tiles. Under the interpreter the fp8 dot runs too (Triton 3.9 interprets it in fp32 over the
decoded values: the codes' products are exact there, the sum is an fp32 one).
Reference twin: reference/gemm_fp8.py::gemm_fp8_ref (numba); bound: reference/tolerance.py::w8a8_bound.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.fp8_act_quant import quantize_fp8_tokens
from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    grouped_tile,
    launch_split_k,
    splitk_finish,
)
from mpsim.kernels.launch_checks import check_tensor
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.kernels.launch_config_fp import gemm_fp8_config
from mpsim.kernels.runtime import device, on_gpu


@triton.jit
def _codes(ptr, offs_r, k0, R, K, stride, BLOCK_K: tl.constexpr):
    """e4m3 codes [offs_r, k0:k0+BLOCK_K] as float8e4nv (zero, code 0, outside R x K)."""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask = (offs_r[:, None] < R) & (offs_k[None, :] < K)
    q = tl.load(ptr + offs_r[:, None] * stride + offs_k[None, :], mask=mask, other=0)
    return q.to(tl.float8e4nv, bitcast=True)


@triton.jit
def gemm_fp8_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                    M, N, K, K_PER_SPLIT,
                    stride_am, stride_wn, stride_om,
                    PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    SPLIT_K: tl.constexpr):
    """Program (output tile, K split): fp8 dot over its K share, scale epilogue, split-K finish."""
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        w = _codes(w_ptr, offs_n, k0, N, K, stride_wn, BLOCK_K)
        a = _codes(a_ptr, offs_m, k0, M, K, stride_am, BLOCK_K)
        acc = tl.dot(w, tl.trans(a), acc, max_num_imprecise_acc=BLOCK_K)
    if PER_CHANNEL:  # noqa: SIM108 (a static branch on a constexpr)
        sw = tl.load(sw_ptr + offs_n, mask=offs_n < N, other=0.0)[:, None]
    else:
        sw = tl.load(sw_ptr)
    sa = tl.load(sa_ptr + offs_m, mask=offs_m < M, other=0.0)[None, :]
    acc = (acc * sw) * sa
    splitk_finish(acc, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n, tile, pid_k,
                  M, N, stride_om, HAS_BIAS, SPLIT_K)


def check_fp8_weight(codes: torch.Tensor, scales: torch.Tensor, dev: torch.device) -> bool:
    """uint8 (N, K) contiguous codes and fp32 scales (1,) or (N,); True when per channel."""
    codes = check_tensor("w_codes", codes, (torch.uint8,), 2, device=dev)
    if not codes.is_contiguous():
        raise ValueError(f"w_codes: expected a contiguous tensor, got strides {tuple(codes.stride())}")
    n = codes.shape[0]
    scales = check_tensor("w_scales", scales, (torch.float32,), 1, device=dev)
    if scales.shape[0] not in (1, n):
        raise ValueError(f"w_scales: expected shape (1,) (per tensor) or ({n},) (per channel), "
                         f"got {tuple(scales.shape)}")
    return scales.shape[0] == n and n > 1


def gemm_fp8_codes(a_codes: torch.Tensor, a_scales: torch.Tensor, w_codes: torch.Tensor,
                   w_scales: torch.Tensor, bias: torch.Tensor | None = None, *,
                   config: LaunchConfig | None = None) -> torch.Tensor:
    """The GEMM on codes already quantized: a (M, K) uint8 + (M,) fp32, w (N, K) uint8 + (1,)/(N,)."""
    dev = device()
    per_channel = check_fp8_weight(w_codes, w_scales, dev)
    a_codes = check_tensor("a_codes", a_codes, (torch.uint8,), 2, device=dev)
    m, k = a_codes.shape
    n = w_codes.shape[0]
    if w_codes.shape[1] != k:
        raise ValueError(f"w_codes: expected shape (N, {k}) to match the activations' K={k}, "
                         f"got {tuple(w_codes.shape)}")
    a_scales = check_tensor("a_scales", a_scales, (torch.float32,), 1, shape=(m,), device=dev)
    bias = check_bias(bias, n, dev)
    cfg = config or gemm_fp8_config(m, n, k, on_gpu=on_gpu())
    tiles = cdiv(m, cfg.block_m or 1) * cdiv(n, cfg.block_n or 1)
    if cfg.kernel != "gemm_fp8_kernel" or tuple(cfg.grid) != (tiles, cfg.split_k):
        raise ValueError(f"config: {cfg} is not a gemm_fp8_kernel config covering M={m}, N={n}")
    out = torch.empty((m, n), dtype=torch.float16, device=a_codes.device)
    record = dict(m=m, n=n, k=k, w_format="fp8", w_bits=8, group_size=None if not per_channel else 0,
                  a_dtype="fp8-e4m3", out_dtype="fp16", bias=bias is not None)
    bk = cfg.block_k or 1
    launch_split_k(gemm_fp8_kernel, cfg, record, a_codes.device, m, n,
                   a_ptr=a_codes, sa_ptr=a_scales, w_ptr=w_codes, sw_ptr=w_scales, bias_ptr=bias,
                   out_ptr=out, M=m, N=n, K=k, K_PER_SPLIT=cdiv(cdiv(k, cfg.split_k), bk) * bk,
                   stride_am=a_codes.stride(0), stride_wn=w_codes.stride(0), stride_om=out.stride(0),
                   PER_CHANNEL=per_channel, HAS_BIAS=bias is not None, BLOCK_M=cfg.block_m,
                   BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k)
    return out


def gemm_fp8(x: torch.Tensor, w_codes: torch.Tensor, w_scales: torch.Tensor,
             bias: torch.Tensor | None = None, *, config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias) as W8A8: x fp16 (M, K) quantized per token (one launch), then the fp8 GEMM."""
    x = check_activations(x, device())
    a_codes, a_scales = quantize_fp8_tokens(x)
    return gemm_fp8_codes(a_codes, a_scales, w_codes, w_scales, bias, config=config)
