"""Uniform group-quantized (int8/4/3/2) weight-only GEMV/GEMM in Triton, y = x @ W_hat.T (+ b).

The weight tile is loaded as packed int32 words, unpacked with shifts and masks in registers
(docs/formats.md: b in {2,4,8} LSB-first within a word; b = 3 as 32 codes per 3-word triple, codes 10
and 21 straddling two words), and dequantized as fp16(float32(q - z) * float32(s)) with one scale and
zero per row per group: exactly the bits of reference/group_quant.py::dequantize_group. The same
@triton.jit tile helper serves the GEMV, the GEMM and the `dequant_group` exact-parts entry point.
Reference twin: reference/gemm_group.py::gemm_group_ref.
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
    load_x_tile,
    mma_rows,
    run_gemm,
    splitk_finish,
    store_output,
)
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.traces.accounting import padded_k

GROUP_BITS = (2, 3, 4, 8)


@triton.jit
def _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Codes of columns k0.. (k0 a multiple of 32), 0 outside N x KP, as (BLOCK_N, chunks, codes
    per chunk) uint32 (a chunk: one packed word at 8 and 4 bits, 32 codes at 3 and 2 bits: a word
    triple or pair cut into four 8-code units), with each chunk's first column (a chunk never
    straddles a group: G is a multiple of 32)."""
    n_mask = offs_n < N
    if BITS <= 3:
        # 32 codes per chunk of BITS words (3 bits: a 96-bit triple, code j at bit 3j, codes 10 and
        # 21 straddling two words; 2 bits: a word pair), cut into four 8-code units with fixed
        # shifts, each of which then unpacks like a word. The 2-bit units (the 16-bit halves of the
        # pair) issue fewer instructions per weight than 4-bit words (scripts/sass_mix.py), so
        # 2-bit is never the slower.
        NC: tl.constexpr = BLOCK_K // 32
        offs_c = k0 // 32 + tl.arange(0, NC)
        mask = n_mask[:, None] & (offs_c[None, :] < KP // 32)
        base = qw_ptr + offs_n[:, None] * stride_qn + BITS * offs_c[None, :]
        w0 = tl.load(base, mask=mask, other=0).to(tl.uint32, bitcast=True)
        w1 = tl.load(base + 1, mask=mask, other=0).to(tl.uint32, bitcast=True)
        if BITS == 3:  # codes 8u..8u+7 fill bits 24u..24u+23: each unit from at most two words
            w2 = tl.load(base + 2, mask=mask, other=0).to(tl.uint32, bitcast=True)
            u0 = w0 & 0xFFFFFF
            u1 = (w0 >> 24) | ((w1 & 0xFFFF) << 8)
            u2 = (w1 >> 16) | ((w2 & 0xFF) << 16)
            u3 = w2 >> 8
        else:
            u0 = w0 & 0xFFFF
            u1 = w0 >> 16
            u2 = w1 & 0xFFFF
            u3 = w1 >> 16
        units = tl.reshape(tl.join(tl.join(u0, u2), tl.join(u1, u3)), (BLOCK_N, NC, 4))
        shift = (tl.arange(0, 8) * BITS).to(tl.uint32)[None, None, None, :]
        codes = tl.reshape((units[:, :, :, None] >> shift) & ((1 << BITS) - 1), (BLOCK_N, NC, 32))
        first_col = offs_c * 32
    else:
        PER: tl.constexpr = 32 // BITS
        NW: tl.constexpr = BLOCK_K // PER
        offs_w = k0 // PER + tl.arange(0, NW)
        mask = n_mask[:, None] & (offs_w[None, :] < KP // PER)
        words = tl.load(qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :], mask=mask,
                        other=0).to(tl.uint32, bitcast=True)
        shift = (tl.arange(0, PER) * BITS).to(tl.uint32)[None, None, :]
        codes = (words[:, :, None] >> shift) & ((1 << BITS) - 1)
        first_col = offs_w * PER
    return codes, first_col


@triton.jit
def _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                  BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = fp16(float32(q - z) * float32(s)), one (s, z) per group.

    No integer-to-float conversion: a code q < 1024 OR-ed into the exponent bits 0x6400 is the fp16
    number 1024 + q exactly; subtracting 1024 + z (z an integer code value, so exact in fp16) gives
    q - z exactly, and one fp16 multiply by s rounds the exact product once, as the reference's
    fp32 product (exact: at most 8 x 11 significant bits) rounded to fp16 does. Scales and zeros
    load once per packed chunk (in the codes' own layout), not per weight.
    """
    codes, first_col = _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N, BLOCK_K)
    offs_g = first_col // GROUP
    mask = (offs_n[:, None] < N) & (offs_g[None, :] < KP // GROUP)
    sz = offs_n[:, None] * stride_sn + offs_g[None, :]
    s = tl.load(s_ptr + sz, mask=mask, other=0.0)[:, :, None]
    z = (tl.load(z_ptr + sz, mask=mask, other=0.0) + 1024.0)[:, :, None]
    qh = (codes | 0x6400).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.reshape((qh - z) * s, (BLOCK_N, BLOCK_K))


@triton.jit
def gemv_group_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                      M, N, K, KP, K_PER_SPLIT,
                      stride_xm, stride_qn, stride_sn, stride_om,
                      BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      SPLIT_K: tl.constexpr):
    """Few rows: program (n tile, K split) unpacks its BLOCK_N packed rows over its share of KP."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, KP)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                          BITS, GROUP, BLOCK_N, BLOCK_K)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = mma_rows(w, x, acc, BLOCK_M)
    splitk_finish(gemv_total(acc, BLOCK_M), out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)


@triton.jit
def gemm_group_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr,
                      M, N, K, KP,
                      stride_xm, stride_qn, stride_sn, stride_om,
                      BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    """Many rows: per output tile, dequantize each W tile to fp16 in registers, then tl.dot."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, KP, BLOCK_K):
        w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                          BITS, GROUP, BLOCK_N, BLOCK_K)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = tl.dot(w, tl.trans(x), acc)
    store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)


@triton.jit
def dequant_group_kernel(qw_ptr, s_ptr, z_ptr, out_ptr,
                         N, K, KP, stride_qn, stride_sn, stride_on,
                         BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr):
    """The exact parts alone: W_hat tile (the GEMM's own tile helper) stored as fp16 (N, K)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    offs_k = k0 + tl.arange(0, BLOCK_K)
    w = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                      BITS, GROUP, BLOCK_N, BLOCK_K)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w, mask=mask)


_KERNELS = ("gemv_group_kernel", "gemm_group_kernel")
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
               config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias): x fp16 (M, K), the docs/formats.md group weight -> fp16 (M, N).

    group_size is the resolved G (KP for whole-row groups). `config` overrides the choice
    (gemm_common.run_gemm: the heuristic, or autotuning on a GPU).
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

    run_gemm(gemv_group_kernel, gemm_group_kernel, config, record, x.device, kp, check, **args)
    return out


def _check_block_k(block_k: int | None, group_size: int) -> None:
    """A K tile must be whole 32-code chunks and must not straddle a group."""
    if block_k is None or block_k < 32 or block_k & (block_k - 1):
        raise ValueError(f"config: block_k must be a power of two >= 32, got {block_k}")
    if (group_size % block_k) if block_k <= group_size else (block_k % group_size):
        raise ValueError(f"config: block_k={block_k} and group_size={group_size}: one must "
                         "divide the other")


def dequant_group(qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, *, k: int,
                  bits: int, group_size: int) -> torch.Tensor:
    """W_hat fp16 (N, k), dequantized by the GEMM's own tile code (for bit-exact tests)."""
    dev = runtime.device()
    kp = _check_group_weight(qweight, scales, zeros, k, bits, group_size, dev)
    n = qweight.shape[0]
    block_n, block_k = DEQUANT_BLOCK
    _check_block_k(block_k, group_size)
    out = torch.empty((n, k), dtype=torch.float16, device=qweight.device)
    grid = (cdiv(n, block_n), cdiv(k, block_k))
    dequant_group_kernel[grid](
        # pointers
        qw_ptr=qweight, s_ptr=scales, z_ptr=zeros, out_ptr=out,
        # sizes
        N=n, K=k, KP=kp,
        # strides
        stride_qn=qweight.stride(0), stride_sn=scales.stride(0), stride_on=out.stride(0),
        # constexprs
        BITS=bits, GROUP=group_size, BLOCK_N=block_n, BLOCK_K=block_k,
    )
    return out
