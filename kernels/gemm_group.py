"""Uniform group-quantized (int8/4/3/2) weight-only GEMV/GEMM in Triton, y = x @ W_hat.T (+ b).

The weight tile is loaded as packed int32 words, unpacked two codes at a time (one shift and one
mask per pair, docs/formats.md's pair layout: even codes of a unit in the low 16-bit half, odd codes
in the high half; b = 3 as 32 codes per 3-word triple), and dequantized as
fp16(float32(q - z) * float32(s)) with one scale and zero per row per group: exactly the bits of
reference/group_quant.py::dequantize_group. The same @triton.jit tile helper serves the GEMV, the
GEMM and the `dequant_group` exact-parts entry point.
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
    load_x_gemv,
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
def _pair(units, j: tl.constexpr, BITS: tl.constexpr):
    """Pair j of every unit: (unit >> b*j) & (2^b - 1) * 0x10001 | 0x64006400 (uint32)."""
    return ((units >> (BITS * j)) & (((1 << BITS) - 1) * 0x10001)) | 0x64006400


@triton.jit
def _pairs_fp16(units, BITS: tl.constexpr):
    """(..., U) uint32 units -> (..., U, P) fp16 1024 + code, P codes per unit (reference/packing.py).

    One shift and one mask per PAIR of codes (_pair): the 16-bit halves are the fp16 numbers
    1024 + code 2j (low) and 1024 + code 2j+1 (high). The pairs are joined with immediate shifts
    (a broadcast shift vector spreads the pairs of one word over several threads), and the halves
    taken as two 16-bit lanes: a 32->16-bit bitcast is what the interpreter cannot do; the compiler
    reads these truncations as the halves of the one register.
    """
    NP: tl.constexpr = (8 if BITS == 3 else 32 // BITS) // 2
    if NP == 2:
        pair = tl.join(_pair(units, 0, BITS), _pair(units, 1, BITS))
    elif NP == 4:  # join(join(a, c), join(b, d)) flattens to a, b, c, d
        pair = tl.join(tl.join(_pair(units, 0, BITS), _pair(units, 2, BITS)),
                       tl.join(_pair(units, 1, BITS), _pair(units, 3, BITS)))
    else:
        pair = tl.join(tl.join(tl.join(_pair(units, 0, BITS), _pair(units, 4, BITS)),
                               tl.join(_pair(units, 2, BITS), _pair(units, 6, BITS))),
                       tl.join(tl.join(_pair(units, 1, BITS), _pair(units, 5, BITS)),
                               tl.join(_pair(units, 3, BITS), _pair(units, 7, BITS))))
    lo = pair.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (pair >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.join(lo, hi)


@triton.jit
def _chunk_word(base, i: tl.constexpr, mask):
    """Word i of every 32-code chunk of the tile, as uint32 (0 where masked)."""
    return tl.load(base + i, mask=mask, other=0).to(tl.uint32, bitcast=True)


@triton.jit
def _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """1024 + code (fp16) of columns k0.. (k0 a multiple of 32), 1024 outside N x KP, as
    (BLOCK_N, chunks, 32), with each 32-code chunk's first column (a chunk never straddles a group:
    G is a multiple of 32).

    Every width loads the BITS words of a chunk as BITS tiles (word i of every chunk) and joins them
    into the chunk's units (the words; at 3 bits unit 3 is gathered from the top nibbles of the
    three). Loading a (BLOCK_N, words) tile instead let LLVM's vectorizer pair the low halves of
    different words into one f16x2 register, two PRMTs per code pair (about 0.9 ALU lanes per
    weight in the sm_90a SASS); with joined units each pair's halves stay in one register.
    """
    n_mask = offs_n < N
    NC: tl.constexpr = BLOCK_K // 32
    offs_c = k0 // 32 + tl.arange(0, NC)
    mask = n_mask[:, None] & (offs_c[None, :] < KP // 32)
    base = qw_ptr + offs_n[:, None] * stride_qn + BITS * offs_c[None, :]
    w0 = _chunk_word(base, 0, mask)
    w1 = _chunk_word(base, 1, mask)
    if BITS == 2:
        units = tl.join(w0, w1)
    else:
        w2 = _chunk_word(base, 2, mask)
        if BITS == 3:  # unit 3 from the three words' top nibbles (reference/packing.py)
            w3 = ((w0 >> 12) & 0x000F000F) | ((w1 >> 8) & 0x00F000F0) | ((w2 >> 4) & 0x0F000F00)
        else:
            w3 = _chunk_word(base, 3, mask)
        if BITS == 8:  # three joins flatten (a, b, c) to 4a + 2b + c
            units = tl.join(tl.join(tl.join(w0, _chunk_word(base, 4, mask)),
                                    tl.join(w2, _chunk_word(base, 6, mask))),
                            tl.join(tl.join(w1, _chunk_word(base, 5, mask)),
                                    tl.join(w3, _chunk_word(base, 7, mask))))
        else:  # join(join(a, c), join(b, d)) flattens to a, b, c, d
            units = tl.join(tl.join(w0, w2), tl.join(w1, w3))
    U: tl.constexpr = 4 if BITS == 3 else BITS
    qh = tl.reshape(_pairs_fp16(tl.reshape(units, (BLOCK_N, NC, U)), BITS), (BLOCK_N, NC, 32))
    return qh, offs_c * 32


@triton.jit
def _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                  BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = fp16(float32(q - z) * float32(s)), one (s, z) per group.

    No integer-to-float conversion: codes extracted in pairs already are the fp16 numbers 1024 + q
    (_pairs_fp16); subtracting 1024 + z (z an integer code value, so exact in fp16) gives q - z
    exactly, and one fp16 multiply by s rounds the exact product once, as the reference's fp32
    product (exact: at most 8 x 11 significant bits) rounded to fp16 does. Scales and zeros load
    once per packed chunk (in the codes' own layout), not per weight.
    """
    qh, first_col = _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N, BLOCK_K)
    offs_g = first_col // GROUP
    mask = (offs_n[:, None] < N) & (offs_g[None, :] < KP // GROUP)
    sz = offs_n[:, None] * stride_sn + offs_g[None, :]
    s = tl.load(s_ptr + sz, mask=mask, other=0.0)[:, :, None]
    z = (tl.load(z_ptr + sz, mask=mask, other=0.0) + 1024.0)[:, :, None]
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
        x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
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
