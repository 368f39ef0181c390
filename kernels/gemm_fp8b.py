"""FP8 W8A8 GEMM with 128x128 weight blocks and 1x128 activation groups (`fp8b`, DeepSeek-V3 / DeepGEMM).

y[m, n] = fp16(sum_kb fl(P_kb sw[n // 128, kb] sa[m, kb]) + b[n]), P_kb the fp32 `tl.dot` of the e4m3
code tiles (as kernels/gemm_fp8.py) over one K tile inside block kb. The scales change every 128
columns of K, so they are applied to each K tile's partial (BLOCK_K divides 128: the GPU's 128, the
interpreter's 32) and the scaled partials accumulate in fp32: the promotion DeepGEMM does every 128
(its 'fp32 accumulation on CUDA cores'), here also the cure for Hopper's narrow fp8 wgmma accumulator
(kernels/gemm_fp8.py's module doc), so no max_num_imprecise_acc is needed. BLOCK_N divides 128, so a
tile's rows share one weight block row. Activations come from kernels/fp8_act_quant.py's
quantize_fp8_groups, weights from reference/fp8_quant.py's quantize_fp8(w, "block").
Reference twin: reference/gemm_fp8.py::gemm_fp8b_ref (numba); bound: reference/tolerance_fp.py's
scaled_gemm_bound.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.fp8_act_quant import quantize_fp8_groups
from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    grouped_tile,
    launch_split_k,
    splitk_finish,
)
from mpsim.kernels.gemm_fp8 import _codes
from mpsim.kernels.launch_checks import check_tensor
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.kernels.launch_config_fp import gemm_fp8b_config
from mpsim.kernels.runtime import device, on_gpu
from mpsim.reference.fp8_quant import FP8_BLOCK


@triton.jit
def gemm_fp8b_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                     M, N, K, K_PER_SPLIT,
                     stride_am, stride_sam, stride_wn, stride_swn, stride_om,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
                     SCALE_BLOCK: tl.constexpr):
    """Program (output tile, K split): per K tile, fp8 dot, scaled by its blocks' scales, added."""
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    sw_row = sw_ptr + (pid_n * BLOCK_N // SCALE_BLOCK) * stride_swn
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        w = _codes(w_ptr, offs_n, k0, N, K, stride_wn, BLOCK_K)
        a = _codes(a_ptr, offs_m, k0, M, K, stride_am, BLOCK_K)
        kb = k0 // SCALE_BLOCK
        sa = tl.load(sa_ptr + offs_m * stride_sam + kb, mask=offs_m < M, other=0.0)
        s = tl.load(sw_row + kb) * sa
        acc += tl.dot(w, tl.trans(a)) * s[None, :]
    splitk_finish(acc, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n, tile, pid_k,
                  M, N, stride_om, HAS_BIAS, SPLIT_K)


def gemm_fp8b_codes(a_codes: torch.Tensor, a_scales: torch.Tensor, w_codes: torch.Tensor,
                    w_scales: torch.Tensor, bias: torch.Tensor | None = None, *,
                    config: LaunchConfig | None = None) -> torch.Tensor:
    """a (M, K) uint8 + fp32 (M, cdiv(K, 128)); w (N, K) uint8 + fp32 (cdiv(N, 128), cdiv(K, 128))."""
    dev = device()
    a_codes = check_tensor("a_codes", a_codes, (torch.uint8,), 2, device=dev)
    w_codes = check_tensor("w_codes", w_codes, (torch.uint8,), 2, device=dev)
    m, k = a_codes.shape
    n = w_codes.shape[0]
    if w_codes.shape[1] != k:
        raise ValueError(f"w_codes: expected shape (N, {k}) to match the activations' K={k}, "
                         f"got {tuple(w_codes.shape)}")
    kb = cdiv(k, FP8_BLOCK)
    a_scales = check_tensor("a_scales", a_scales, (torch.float32,), 2, shape=(m, kb), device=dev)
    w_scales = check_tensor("w_scales", w_scales, (torch.float32,), 2, shape=(cdiv(n, FP8_BLOCK), kb),
                            device=dev)
    bias = check_bias(bias, n, dev)
    cfg = config or gemm_fp8b_config(m, n, k, on_gpu=on_gpu())
    bn, bk = cfg.block_n or 1, cfg.block_k or 1
    tiles = cdiv(m, cfg.block_m or 1) * cdiv(n, bn)
    if cfg.kernel != "gemm_fp8b_kernel" or tuple(cfg.grid) != (tiles, cfg.split_k) \
            or FP8_BLOCK % bn or FP8_BLOCK % bk:
        raise ValueError(f"config: {cfg} is not a gemm_fp8b_kernel config covering M={m}, N={n} with "
                         f"tiles inside the {FP8_BLOCK} x {FP8_BLOCK} scale blocks")
    out = torch.empty((m, n), dtype=torch.float16, device=a_codes.device)
    record = dict(m=m, n=n, k=k, w_format="fp8-block", w_bits=8, group_size=FP8_BLOCK,
                  a_dtype="fp8-e4m3", out_dtype="fp16", bias=bias is not None)
    launch_split_k(gemm_fp8b_kernel, cfg, record, a_codes.device, m, n,
                   a_ptr=a_codes, sa_ptr=a_scales, w_ptr=w_codes, sw_ptr=w_scales, bias_ptr=bias,
                   out_ptr=out, M=m, N=n, K=k, K_PER_SPLIT=cdiv(cdiv(k, cfg.split_k), bk) * bk,
                   stride_am=a_codes.stride(0), stride_sam=a_scales.stride(0),
                   stride_wn=w_codes.stride(0), stride_swn=w_scales.stride(0), stride_om=out.stride(0),
                   HAS_BIAS=bias is not None, BLOCK_M=cfg.block_m, BLOCK_N=bn, BLOCK_K=bk,
                   GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k, SCALE_BLOCK=FP8_BLOCK)
    return out


def gemm_fp8b(x: torch.Tensor, w_codes: torch.Tensor, w_scales: torch.Tensor,
              bias: torch.Tensor | None = None, *, config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias), fp8b: x fp16 (M, K) quantized per 1x128 group (one launch), then the GEMM."""
    x = check_activations(x, device())
    a_codes, a_scales = quantize_fp8_groups(x, FP8_BLOCK)
    return gemm_fp8b_codes(a_codes, a_scales, w_codes, w_scales, bias, config=config)
