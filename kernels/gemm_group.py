"""Uniform group-quantized (int8/4/3/2) weight-only GEMM in Triton, y = x @ W_hat.T (+ b), and the
launcher of the group GEMV/GEMM (the GEMV kernel: gemv_group.py).

The tiled GEMM dequantizes each weight tile (group_dequant.py: packed int32 words unpacked two codes
at a time) to fp16(float32(q - z) * float32(s)), one scale and zero per row per group: exactly the
bits of reference/group_quant.py::dequantize_group, then tl.dot. Reference twins:
reference/gemm_group.py (and reference/gemv_group.py for the one-row GEMV's partial sums).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import triton
import triton.language as tl

from mpsim.kernels import runtime
from mpsim.kernels.dot_tile import unit3_high
from mpsim.kernels.gemm_common import (
    check_activations,
    check_bias,
    check_config,
    check_weight,
    fp16_bits,
    grouped_tile,
    load_x_tile,
    run_gemm,
    store_output,
)
from mpsim.kernels.gemv_group import gemv_group_kernel, pair_swap
from mpsim.kernels.gemv_group_asm import (
    ASM_KERNEL,
    asm_args,
    gemv_group_asm_kernel,
    switch_on,
    takes_asm,
)
from mpsim.kernels.group_dequant import _group_w_tile
from mpsim.kernels.launch_config import SZ_WORDS_KEY, LaunchConfig, cdiv, gemv_k_unit
from mpsim.traces.accounting import padded_k

GROUP_BITS = (2, 3, 4, 8)


@triton.jit
def gemm_group_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr,
                      M, N, K, KP,
                      stride_xm, stride_qn, stride_sn, stride_om,
                      BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, sz_ptr=None, SZ_WORDS: tl.constexpr = False):
    """Many rows: per output tile, dequantize each W tile to fp16 in registers, then tl.dot
    (SZ_WORDS: scales and zeros read from sz_ptr's words, kernels/sz_words.py)."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    tl.assume(KP > 0)  # at least one K tile: no zero-trip path (gemm_common.gemv_program)
    for k0 in range(0, KP, BLOCK_K):
        w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                          BITS, GROUP, BLOCK_N, BLOCK_K, False, sz_ptr=sz_ptr, SZ_WORDS=SZ_WORDS,
                          DOT=True)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = tl.dot(w, tl.trans(x), acc)
    store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)


@triton.jit
def dequant_group_kernel(qw_ptr, s_ptr, z_ptr, sz_ptr, out_ptr,
                         N, K, KP, stride_qn, stride_sn, stride_on,
                         BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, SZ_WORDS: tl.constexpr, DOT: tl.constexpr,
                         UNIT3_HIGH: tl.constexpr):
    """The exact parts alone: W_hat tile (the GEMM's own tile helper) stored as fp16 (N, K); DOT:
    the tile the tl.dot loops build (dot_tile._dot_w; UNIT3_HIGH as dot_tile.unit3_high), else the
    one-row GEMV's."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    offs_k = k0 + tl.arange(0, BLOCK_K)
    w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                      BITS, GROUP, BLOCK_N, BLOCK_K, True, sz_ptr=sz_ptr, SZ_WORDS=SZ_WORDS,
                      DOT=DOT, UNIT3_HIGH=UNIT3_HIGH)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w, mask=mask)


_KERNELS = ("gemv_group_kernel", "gemm_group_kernel", ASM_KERNEL)
DEQUANT_BLOCK = (32, 32)  # (BLOCK_N, BLOCK_K) of dequant_group: a test/offline path, not timed


def _check_group_weight(qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, k: int,
                       bits: int, group_size: int, device: torch.device) -> int:
    """Validate the packed weight of an N x k matrix; returns KP, the padded K it was packed at."""
    if bits not in GROUP_BITS:
        raise ValueError(f"bits: expected one of {GROUP_BITS}, got {bits!r}")
    qweight = check_weight("qweight", qweight, torch.int32, 2, device)
    n, words = qweight.shape
    if words % bits:
        raise ValueError(f"qweight: expected KP*{bits}/32 int32 words per row, got {words}")
    kp = words // bits * 32
    if group_size < 32 or group_size % 32 or kp % group_size:
        raise ValueError(f"group_size: expected a multiple of 32 dividing KP={kp}, got {group_size}")
    if kp != padded_k(k, group_size):
        raise ValueError(f"qweight: packs KP={kp} columns, but K={k} with group {group_size} pads "
                         f"to {padded_k(k, group_size)}")
    for name, t in (("scales", scales), ("zeros", zeros)):
        t = check_weight(name, t, torch.float16, 2, device)
        if tuple(t.shape) != (n, kp // group_size):
            raise ValueError(f"{name}: expected shape {(n, kp // group_size)} (N x KP/G), "
                             f"got {tuple(t.shape)}")
    return kp


def gemm_group(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
               *, bits: int, group_size: int, bias: torch.Tensor | None = None,
               config: LaunchConfig | None = None, sz: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias): x fp16 (M, K), the docs/formats.md group weight -> fp16 (M, N).

    group_size is the resolved G (KP for whole-row groups). `config` overrides the choice
    (gemm_common.run_gemm: the heuristic, or autotuning on a GPU). `sz`: scale_zero_words(scales,
    zeros), which a config with sz_words reads (GroupWeight builds it once, at load); made here, at
    each launch that reads it, when not given.
    """
    dev = runtime.device()
    x = check_activations(x, dev)
    m, k = x.shape
    kp = _check_group_weight(qweight, scales, zeros, k, bits, group_size, dev)
    n = qweight.shape[0]
    bias = check_bias(bias, n, dev)
    w_format = f"int{bits}-group"
    out = torch.empty((m, n), dtype=torch.float16, device=x.device)
    record = dict(m=m, n=n, k=k, w_format=w_format, w_bits=bits, group_size=group_size,
                  a_dtype="fp16", out_dtype="fp16", bias=bias is not None)
    args = dict(
        # pointers
        x_ptr=x, qw_ptr=qweight, s_ptr=scales, z_ptr=zeros, bias_ptr=bias, out_ptr=out,
        # sizes
        M=m, N=n, K=k, KP=kp,
        # strides
        stride_xm=x.stride(0), stride_qn=qweight.stride(0), stride_sn=scales.stride(0),
        stride_om=out.stride(0),
        # constexprs
        BITS=bits, GROUP=group_size, HAS_BIAS=bias is not None,
    )

    def check(cfg: LaunchConfig) -> None:
        check_config(cfg, _KERNELS, m, n)
        _check_block_k(cfg.block_k, group_size)

    def asm(cfg: LaunchConfig) -> LaunchConfig:
        """The launcher switch: on a GPU with MPSIM_GEMV_ASM=1, the one-row partial-sum configs
        run gemv_group_asm_kernel (inline PTX; the interpreter never takes it)."""
        if cfg.kernel == ASM_KERNEL and not runtime.on_gpu():
            raise ValueError(f"config: {ASM_KERNEL} runs inline PTX, which the interpreter cannot")
        if runtime.on_gpu() and switch_on() and takes_asm(cfg, bits, group_size):
            return dataclasses.replace(cfg, kernel=ASM_KERNEL)
        return cfg

    if sz is not None:
        _check_sz(sz, scales.shape, dev)

    def words() -> dict[str, Any]:
        return {"sz_ptr": sz if sz is not None else scale_zero_words(scales, zeros), "SZ_WORDS": True}

    cap = torch.cuda.get_device_capability(x.device) if runtime.on_gpu() else None
    run_gemm(gemv_group_kernel, gemm_group_kernel, config, record, x.device, kp, check,
             k_unit=lambda c: gemv_k_unit("group", bits, group_size, c.block_m, c.block_k or 1),
             variant=(gemv_group_asm_kernel, asm, asm_args(k, kp)),
             gemv_args=dict(PAIR_SWAP=pair_swap(cap), UNIT3_HIGH=unit3_high(cap)),
             keyed_args={SZ_WORDS_KEY: words}, **args)
    return out


def scale_zero_words(scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """int32 (N, KP/G): each group's fp16 scale bits in the low half and zero bits in the high, the
    words a config with sz_words reads (kernels/sz_words.py; reference/group_quant.py
    scale_zero_words is the same bits)."""
    return fp16_bits(scales) | (fp16_bits(zeros) << 16)


def _check_sz(sz: torch.Tensor, shape: torch.Size, device: torch.device) -> None:
    t = check_weight("sz", sz, torch.int32, 2, device)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"sz: expected shape {tuple(shape)} (the scales' N x KP/G), got "
                         f"{tuple(t.shape)}")


def _check_block_k(block_k: int | None, group_size: int) -> None:
    """A K tile must be whole 32-code chunks and must not straddle a group."""
    if block_k is None or block_k < 32 or block_k & (block_k - 1):
        raise ValueError(f"config: block_k must be a power of two >= 32, got {block_k}")
    if (group_size % block_k) if block_k <= group_size else (block_k % group_size):
        raise ValueError(f"config: block_k={block_k} and group_size={group_size}: one must "
                         "divide the other")


def dequant_group(qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, *, k: int,
                  bits: int, group_size: int, dot: bool = False,
                  unit3_high: bool = True) -> torch.Tensor:
    """W_hat fp16 (N, k), dequantized by the kernels' own tile code (for bit-exact tests): the
    tl.dot loops' tile (2..16 rows, tiled GEMM) with `dot`, else the one-row W_hat loop's;
    `unit3_high`: the 2..16-row GEMVs' 3-bit tile on Hopper and later (dot_tile.unit3_high), False
    the tiled GEMM's and Ampere's."""
    dev = runtime.device()
    kp = _check_group_weight(qweight, scales, zeros, k, bits, group_size, dev)
    n = qweight.shape[0]
    block_n, block_k = DEQUANT_BLOCK
    _check_block_k(block_k, group_size)
    out = torch.empty((n, k), dtype=torch.float16, device=qweight.device)
    grid = (cdiv(n, block_n), cdiv(k, block_k))
    dequant_group_kernel[grid](
        # pointers
        qw_ptr=qweight, s_ptr=scales, z_ptr=zeros, sz_ptr=scale_zero_words(scales, zeros),
        out_ptr=out,
        # sizes
        N=n, K=k, KP=kp,
        # strides
        stride_qn=qweight.stride(0), stride_sn=scales.stride(0), stride_on=out.stride(0),
        # constexprs
        BITS=bits, GROUP=group_size, BLOCK_N=block_n, BLOCK_K=block_k,
        SZ_WORDS=True,  # the tile the W_hat loops read (2-byte loads: the GEMM tests' configs)
        DOT=dot, UNIT3_HIGH=dot and unit3_high,
    )
    return out
