"""Uniform group-quantized (int8/4/3/2) weight-only GEMV/GEMM in Triton, y = x @ W_hat.T (+ b).

The weight tile is loaded as packed int32 words and unpacked two codes at a time (docs/formats.md's
pair layout: even codes of a unit in the low 16-bit half, odd codes in the high half; b = 3 as 32
codes per 3-word triple): one shift and one mask per pair at 8 and 4 bits (and in the tiled GEMM);
in the GEMVs at 3 and 2 bits one mask per pair taken at its own bits of the fp16 mantissa (_at).
Dequantized as fp16(float32(q - z) * float32(s)), one scale and zero per row per group: exactly the
bits of reference/group_quant.py::dequantize_group. Reference twin: reference/gemm_group.py.
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
def _join4(a, b, c, d):
    """(..., 4) in the order a, b, c, d (join(join(a, c), join(b, d)) flattens that way)."""
    return tl.join(tl.join(a, c), tl.join(b, d))


@triton.jit
def _at(word, k: tl.constexpr, BITS: tl.constexpr, c0, s):
    """The code pair at bits k.. of each 16-bit half of `word` (k + BITS <= 10), without a shift:
    OR-ing the fp16 exponent of 2^(10-k) makes each half exactly 2^(10-k) + code (the code is the
    mantissa's bits k..); minus 2^(10-k) + z (from c0 = 1024 + z: an exact fp16 add at 3 bits, the
    bits (0x6400 + z) << k plus a constant at 2 bits, off the fp32 pipe) that is q - z exactly, and
    one multiply by s rounds once, as the reference does. Returns (low half, high half) fp16."""
    MAGIC: tl.constexpr = ((25 - k) << 10) * 0x10001
    p = (word & ((((1 << BITS) - 1) << k) * 0x10001)) | MAGIC
    lo = p.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (p >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    if k == 0:
        c = c0
    elif BITS == 3:
        c = c0 + ((1 << (10 - k)) - 1024.0)
    else:
        C: tl.constexpr = (((25 - k) << 10) - (0x6400 << k)) & 0xFFFF
        c = ((c0.to(tl.uint16, bitcast=True) << k) + C).to(tl.uint16).to(tl.float16, bitcast=True)
    return (lo - c) * s, (hi - c) * s


@triton.jit
def _dequant2(w0, w1, zc, s):
    """2-bit chunk (two words): pairs 0..3 of a word at bits 0, 2, 4, 6 as they are, pairs 4..7 at
    the same bits of word >> 8: one shift per 16 codes (_at). (BLOCK_N, NC, 32) fp16 W_hat."""
    u = tl.join(w0, w1)
    t = u >> 8
    zc, s = zc[:, :, None], s[:, :, None]  # zc: 1024 + z (_at's c0)
    l0, h0 = _at(u, 0, 2, zc, s)
    l1, h1 = _at(u, 2, 2, zc, s)
    l2, h2 = _at(u, 4, 2, zc, s)
    l3, h3 = _at(u, 6, 2, zc, s)
    l4, h4 = _at(t, 0, 2, zc, s)
    l5, h5 = _at(t, 2, 2, zc, s)
    l6, h6 = _at(t, 4, 2, zc, s)
    l7, h7 = _at(t, 6, 2, zc, s)
    lo = tl.join(_join4(l0, l2, l4, l6), _join4(l1, l3, l5, l7))
    hi = tl.join(_join4(h0, h2, h4, h6), _join4(h1, h3, h5, h7))
    return tl.join(lo, hi)


@triton.jit
def _unit3(w, zc, s):
    """Pairs 0..3 of a 3-bit word's unit (low, high halves): bits 0, 3, 6 as they are, 9 shifted."""
    l0, h0 = _at(w, 0, 3, zc, s)
    l1, h1 = _at(w, 3, 3, zc, s)
    l2, h2 = _at(w, 6, 3, zc, s)
    l3, h3 = _at(w >> 9, 0, 3, zc, s)
    return l0, h0, l1, h1, l2, h2, l3, h3


@triton.jit
def _dequant3(w0, w1, w2, zc, s):
    """3-bit chunk (three words): units 0..2 are the words (_unit3); unit 3 is in their top nibbles,
    at bits 3..6 of w >> 9: pair 0 bits 3..5 of w0 >> 9, pair 3 bits 4..6 of w2 >> 9, pairs 1 and
    2 straddle two nibbles, joined at bits 6..8 and 5..7 with one more shift. (BN, NC, 32) fp16."""
    a0, b0, a1, b1, a2, b2, a3, b3 = _unit3(w0, zc, s)
    c0, d0, c1, d1, c2, d2, c3, d3 = _unit3(w1, zc, s)
    e0, f0, e1, f1, e2, f2, e3, f3 = _unit3(w2, zc, s)
    s0, s1, s2 = w0 >> 9, w1 >> 9, w2 >> 9
    g0, k0 = _at(s0, 3, 3, zc, s)
    g1, k1 = _at((s0 & 0x00400040) | ((s1 << 4) & 0x01800180), 6, 3, zc, s)
    g2, k2 = _at((s1 & 0x00600060) | ((s2 << 4) & 0x00800080), 5, 3, zc, s)
    g3, k3 = _at(s2, 4, 3, zc, s)
    lo = _join4(_join4(a0, c0, e0, g0), _join4(a1, c1, e1, g1), _join4(a2, c2, e2, g2),
                _join4(a3, c3, e3, g3))
    hi = _join4(_join4(b0, d0, f0, k0), _join4(b1, d1, f1, k1), _join4(b2, d2, f2, k2),
                _join4(b3, d3, f3, k3))
    return tl.join(lo, hi)


@triton.jit
def _chunk_word(base, i: tl.constexpr, mask):
    """Word i of every 32-code chunk of the tile, as uint32 (0 where masked)."""
    return tl.load(base + i, mask=mask, other=0).to(tl.uint32, bitcast=True)


@triton.jit
def _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """1024 + code (fp16) of columns k0.. (k0 a multiple of 32), 1024 outside N x KP, as (BLOCK_N,
    chunks, 32), with each chunk's first column (a chunk never straddles a group: 32 divides G).

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
                  BLOCK_K: tl.constexpr, AT_BITS: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = fp16(float32(q - z) * float32(s)), one (s, z) per group.

    No int-to-float conversion: extracted pairs are fp16 numbers c + q, c = 1024 (_pairs_fp16) or
    2^(10-k) (_at, AT_BITS at 3 and 2 bits: GEMV and exact parts; the tiled GEMM keeps the shifts,
    the other form's SASS being larger at its tiles); minus c + z (exact) that is q - z, and one
    fp16 multiply by s rounds the exact product once, as the reference's exact fp32 product
    rounded to fp16 does. Scales and zeros load once per chunk (or row), not per weight.
    """
    if AT_BITS and BITS <= 3:
        w = _group_w_at(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                        BITS, GROUP, BLOCK_N, BLOCK_K)
    else:
        qh, first_col = _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N,
                                     BLOCK_K)
        offs_g = first_col // GROUP
        mask = (offs_n[:, None] < N) & (offs_g[None, :] < KP // GROUP)
        sz = offs_n[:, None] * stride_sn + offs_g[None, :]
        s = tl.load(s_ptr + sz, mask=mask, other=0.0)[:, :, None]
        z = (tl.load(z_ptr + sz, mask=mask, other=0.0) + 1024.0)[:, :, None]
        w = (qh - z) * s
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _group_w_at(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """_group_w_tile at 2 and 3 bits, pairs taken at their own bits (_dequant2/3): (BN, NC, 32)."""
    NC: tl.constexpr = BLOCK_K // 32
    offs_c = k0 // 32 + tl.arange(0, NC)
    n_mask = offs_n < N
    mask = n_mask[:, None] & (offs_c[None, :] < KP // 32)
    base = qw_ptr + offs_n[:, None] * stride_qn + BITS * offs_c[None, :]
    if BLOCK_K <= GROUP:  # noqa: SIM108 (constexpr branch) one group per row: (s, z) per row
        offs_g = k0 // GROUP + tl.arange(0, 1)
    else:
        offs_g = offs_c * 32 // GROUP
    gmask = n_mask[:, None] & (offs_g[None, :] < KP // GROUP)
    sz = offs_n[:, None] * stride_sn + offs_g[None, :]
    s = tl.load(s_ptr + sz, mask=gmask, other=0.0)
    zc = tl.load(z_ptr + sz, mask=gmask, other=0.0) + 1024.0  # c0 of _at
    w0 = _chunk_word(base, 0, mask)
    w1 = _chunk_word(base, 1, mask)
    if BITS == 2:  # noqa: SIM108 (a static branch on a constexpr)
        w = _dequant2(w0, w1, zc, s)
    else:
        w = _dequant3(w0, w1, _chunk_word(base, 2, mask), zc, s)
    return w


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
                          BITS, GROUP, BLOCK_N, BLOCK_K, True)
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
                          BITS, GROUP, BLOCK_N, BLOCK_K, False)
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
                      BITS, GROUP, BLOCK_N, BLOCK_K, True)
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
