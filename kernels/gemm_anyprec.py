"""Any-precision (bit-plane + per-row LUT) weight-only GEMV/GEMM in Triton, y = x @ W_hat.T (+ b).

Reading at b bits touches only bit-planes 0..b-1 of the parent's (P, N, KP/32) planes and the b-bit
LUT (docs/formats.md), so the bytes read scale with b while one parent model serves every width.
Per tile, the kernel loads b words per 32 weights of a row, assembles code_b = sum_j bit_j << (b-1-j)
in registers (at b <= 4 by Any-Precision LLM's word-wide bit transpose, _transpose4), and looks
the fp16 weight up in lut{b}[n, code_b] (a 2^b-entry row that stays in L1; at b <= 4 gathered on
the transposed words' own layout, _lut_fields). At b <= PAIR_MAX_BITS
(3) every path (one-row GEMV, few-row GEMV, tiled GEMM) instead assembles the index of each pair of
weights (the bit interleave of their codes) and reads both values with one 32-bit load from the
row's pair table (pair_table, built when the weight is loaded; docs/formats.md), as Any-Precision
LLM does at <= 3 bits with one activation row; the loads are issued on the index words' own layout
and only their values joined into the tile (_lookup4), so the tile needs no layout change through
shared memory. The same @triton.jit tile helpers serve the GEMV, the GEMM and `dequant_anyprec`.
Reference twin: reference/gemm_anyprec.py::gemm_anyprec_ref.
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
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.traces.accounting import PAIR_MAX_BITS, padded_k

MAX_PARENT_BITS = 8
# PAIR_MAX_BITS (traces/accounting.py, 3): widths whose one-row GEMV reads the per-row pair table, as
# Any-Precision LLM reads fp16 pairs at <= 3 bits with one activation row (4 bits would need 1 KiB a
# row: docs/kernels.md)


@triton.jit
def _transpose4(words, mask, stride_qp, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                NW: tl.constexpr):
    """Any-Precision LLM's word-wide bit transpose (its `dequant`), BITS <= 4: for residue r < 4,
    q_r = OR over planes j of ((p_j >> r) & 0x11111111) << (BITS-1-j) holds in nibble t the code of
    weight 4t + r of its word (3 ops per plane and residue: 0.375 per weight and plane)."""
    q0 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q1 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q2 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q3 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        p = tl.load(words + j * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
        q0 |= (p & 0x11111111) << (BITS - 1 - j)
        q1 |= ((p >> 1) & 0x11111111) << (BITS - 1 - j)
        q2 |= ((p >> 2) & 0x11111111) << (BITS - 1 - j)
        q3 |= ((p >> 3) & 0x11111111) << (BITS - 1 - j)
    return q0, q1, q2, q3


@triton.jit
def _lut_fields(q, row_ptr, BITS: tl.constexpr):
    """The LUT values of the 8 nibble fields of q (field t: bits 4t..4t+3, masked to BITS bits) as
    (..., 8) in t order, one gather load per field on q's own layout (the values, not the codes,
    are joined, so the loads need no layout change; (t, r) of the caller's join flattens to
    weight 4t + r)."""
    M: tl.constexpr = (1 << BITS) - 1
    v0 = tl.load(row_ptr + (q & M).to(tl.int32))
    v1 = tl.load(row_ptr + ((q >> 4) & M).to(tl.int32))
    v2 = tl.load(row_ptr + ((q >> 8) & M).to(tl.int32))
    v3 = tl.load(row_ptr + ((q >> 12) & M).to(tl.int32))
    v4 = tl.load(row_ptr + ((q >> 16) & M).to(tl.int32))
    v5 = tl.load(row_ptr + ((q >> 20) & M).to(tl.int32))
    v6 = tl.load(row_ptr + ((q >> 24) & M).to(tl.int32))
    v7 = tl.load(row_ptr + ((q >> 28) & M).to(tl.int32))
    return tl.join(tl.join(tl.join(v0, v4), tl.join(v2, v6)), tl.join(tl.join(v1, v5), tl.join(v3, v7)))


@triton.jit
def _wide_codes(words, mask, stride_qp, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                NW: tl.constexpr):
    """code_BITS of every weight of the tile as (BLOCK_N, NW * 32) int32, planes 0..BITS-1 (MSB
    first), BITS > 4: one shift, mask and OR per weight and plane."""
    shift = tl.arange(0, 32).to(tl.uint32)[None, None, :]
    code = tl.zeros((BLOCK_N, NW, 32), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        plane = tl.load(words + j * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
        code = (code << 1) | ((plane[:, :, None] >> shift) & 1)
    return tl.reshape(code, (BLOCK_N, NW * 32)).to(tl.int32)


@triton.jit
def _anyprec_w_tile(qw_ptr, lut_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                    BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = lut{BITS}[n, code]: planes 0..BITS-1 read, MSB first.
    BITS <= 4: the LUT gathered on the transposed words' layout (_lut_fields; rows past N read row
    N - 1, whose outputs are never stored); wider: codes per weight, then one gather."""
    NW: tl.constexpr = BLOCK_K // 32
    offs_w = k0 // 32 + tl.arange(0, NW)
    n_mask = offs_n < N
    mask = n_mask[:, None] & (offs_w[None, :] < KP // 32)
    words = qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :]
    if BITS <= 4:
        q0, q1, q2, q3 = _transpose4(words, mask, stride_qp, BITS, BLOCK_N, NW)
        row_ptr = lut_ptr + (tl.minimum(offs_n, N - 1) * stride_ln)[:, None]
        w = tl.join(tl.join(_lut_fields(q0, row_ptr, BITS), _lut_fields(q2, row_ptr, BITS)),
                    tl.join(_lut_fields(q1, row_ptr, BITS), _lut_fields(q3, row_ptr, BITS)))
        w = tl.reshape(w, (BLOCK_N, BLOCK_K))
    else:
        code = _wide_codes(words, mask, stride_qp, BITS, BLOCK_N, NW)
        w = tl.load(lut_ptr + offs_n[:, None] * stride_ln + code, mask=n_mask[:, None], other=0.0)
    return w


@triton.jit
def _pair_term(p, j: tl.constexpr, s: tl.constexpr, BITS: tl.constexpr):
    """Plane j's bits of the weights 8t + 2s and 8t + 2s + 1, moved to bits 2m and 2m + 1 (m =
    BITS-1-j) of every byte t: part of pair 4t + s's index, the bit interleave of its two codes."""
    return ((p >> (2 * s)) & 0x03030303) << (2 * (BITS - 1 - j))


@triton.jit
def _lookup4(q, row_ptr):
    """The pair-table words (int32) of the 4 indices in the bytes of q, as (..., 4), byte t at
    index t: one gather load per index on q's own layout (the values, not the indices, are joined,
    so the loads need no layout change)."""
    w0 = tl.load(row_ptr + (q & 0xFF).to(tl.int32))
    w1 = tl.load(row_ptr + ((q >> 8) & 0xFF).to(tl.int32))
    w2 = tl.load(row_ptr + ((q >> 16) & 0xFF).to(tl.int32))
    w3 = tl.load(row_ptr + (q >> 24).to(tl.int32))
    return tl.join(tl.join(w0, w2), tl.join(w1, w3))


@triton.jit
def _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_pn,
                       BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 from the per-row pair table (BITS <= PAIR_MAX_BITS):
    pair i's index code_{2i} << BITS | code_{2i+1} (bit-interleaved) is assembled word-wide (byte t
    of the word for residue s holds the index of pair 4t + s, _pair_term), then one 32-bit load per
    two weights of pairs[n, index] = lut[code_{2i}] | lut[code_{2i+1}] << 16 (pair_ptr: the table's
    int32 words), split into its fp16 halves."""
    NW: tl.constexpr = BLOCK_K // 32
    offs_w = k0 // 32 + tl.arange(0, NW)
    n_mask = offs_n < N
    mask = n_mask[:, None] & (offs_w[None, :] < KP // 32)
    words = qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :]
    q0 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q1 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q2 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q3 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        p = tl.load(words + j * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
        q0 |= _pair_term(p, j, 0, BITS)
        q1 |= _pair_term(p, j, 1, BITS)
        q2 |= _pair_term(p, j, 2, BITS)
        q3 |= _pair_term(p, j, 3, BITS)
    # rows past N read row N - 1 (their outputs are never stored), so the loads need no mask
    row_ptr = pair_ptr + (tl.minimum(offs_n, N - 1) * stride_pn)[:, None]
    # (..., t, s) flattens to pair 4t + s of the word: (BLOCK_N, NW, 16), pair 16w + 4t + s
    pw = tl.join(tl.join(_lookup4(q0, row_ptr), _lookup4(q2, row_ptr)),
                 tl.join(_lookup4(q1, row_ptr), _lookup4(q3, row_ptr)))
    pw = tl.reshape(pw, (BLOCK_N, NW, 16)).to(tl.uint32, bitcast=True)
    lo = (pw & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (pw >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))


@triton.jit
def _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                  stride_pn, BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  PAIR_BITS: tl.constexpr):
    """The W_hat tile every path multiplies: from the pair table at BITS <= PAIR_BITS, else from
    the LUT (the same exact fp16 values either way)."""
    if BITS <= PAIR_BITS:
        w = _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                               stride_pn, BITS, BLOCK_N, BLOCK_K)
    else:
        w = _anyprec_w_tile(qw_ptr, lut_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                            BITS, BLOCK_N, BLOCK_K)
    return w


@triton.jit
def gemv_anyprec_kernel(x_ptr, qw_ptr, lut_ptr, pair_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                        M, N, K, KP, K_PER_SPLIT,
                        stride_xm, stride_qp, stride_qn, stride_ln, stride_pn, stride_om,
                        BITS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                        PAIR_BITS: tl.constexpr, LOOP_STAGES: tl.constexpr = 0):
    """Few rows: program (n tile, K split) streams BITS planes of its rows over its share of KP,
    its W tile from the pair table at BITS <= PAIR_BITS, else from the LUT (_anyprec_tile).
    LOOP_STAGES > 0 (the one-row GPU configs' loop_stages): the K loop's loads pipelined that deep."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, KP)
    acc = gemv_acc(BLOCK_M, BLOCK_N, BLOCK_K)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=loop_stages(LOOP_STAGES)):
        w = _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                          stride_ln, stride_pn, BITS, BLOCK_N, BLOCK_K, PAIR_BITS)
        x = load_x_gemv(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_M, BLOCK_K)
        acc = mma_rows(w, x, acc, BLOCK_M)
    total = gemv_total(acc, BLOCK_M)
    splitk_finish(total, out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)


@triton.jit
def gemm_anyprec_kernel(x_ptr, qw_ptr, lut_ptr, pair_ptr, bias_ptr, out_ptr,
                        M, N, K, KP,
                        stride_xm, stride_qp, stride_qn, stride_ln, stride_pn, stride_om,
                        BITS: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        PAIR_BITS: tl.constexpr):
    """Many rows: per output tile, look each W tile up to fp16 in registers (_anyprec_tile: the
    pair table at BITS <= PAIR_BITS, else the LUT), then tl.dot."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, KP, BLOCK_K):
        w = _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                          stride_ln, stride_pn, BITS, BLOCK_N, BLOCK_K, PAIR_BITS)
        x = load_x_tile(x_ptr, offs_m, k0, M, K, stride_xm, BLOCK_K)
        acc = tl.dot(w, tl.trans(x), acc)
    store_output(acc, out_ptr, bias_ptr, offs_m, offs_n, M, N, stride_om, HAS_BIAS)


@triton.jit
def dequant_anyprec_kernel(qw_ptr, lut_ptr, pair_ptr, out_ptr,
                           N, K, KP, stride_qp, stride_qn, stride_ln, stride_pn, stride_on,
                           BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           PAIRS: tl.constexpr):
    """The exact parts alone: W_hat tile (the kernels' LUT tile helper, or with PAIRS their
    pair-table tile helper) stored as fp16 (N, K)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    offs_k = k0 + tl.arange(0, BLOCK_K)
    if PAIRS:
        w = _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                               stride_pn, BITS, BLOCK_N, BLOCK_K)
    else:
        w = _anyprec_w_tile(qw_ptr, lut_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                            BITS, BLOCK_N, BLOCK_K)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w, mask=mask)


_KERNELS = ("gemv_anyprec_kernel", "gemm_anyprec_kernel")
DEQUANT_BLOCK = (32, 32)  # (BLOCK_N, BLOCK_K) of dequant_anyprec: a test/offline path, not timed


def _spread(c: torch.Tensor, bits: int) -> torch.Tensor:
    """Bit m of c moved to bit 2m."""
    return sum(((c >> m) & 1) << (2 * m) for m in range(bits))  # type: ignore[return-value]


def pair_table(lut: torch.Tensor) -> torch.Tensor:
    """The per-row pair table of an fp16 LUT (N, 2^b), b <= PAIR_MAX_BITS: fp16 (N, 4^b, 2), entry
    spread(c_even) | spread(c_odd) << 1 (the bit interleave of the two codes, spread: bit m to bit
    2m) = (lut[n, c_even], lut[n, c_odd]), one 4-byte-aligned pair the one-row GEMV loads as one
    32-bit word. Built once when a weight is loaded (engine/kernel_weights.py), not per launch."""
    if lut.dtype != torch.float16 or lut.dim() != 2 or lut.shape[1] & (lut.shape[1] - 1) or not (
            2 <= lut.shape[1] <= 1 << PAIR_MAX_BITS):
        raise ValueError(f"lut: expected fp16 (N, 2^bits), bits 1..{PAIR_MAX_BITS}, got "
                         f"{lut.dtype} {tuple(lut.shape)}")
    n, size = lut.shape
    bits = size.bit_length() - 1
    codes = torch.arange(size, device=lut.device)
    index = (_spread(codes, bits)[:, None] | (_spread(codes, bits)[None, :] << 1)).reshape(-1)
    pairs = torch.empty((n, size * size, 2), dtype=torch.float16, device=lut.device)
    pairs[:, index, 0] = lut[:, :, None].expand(n, size, size).reshape(n, -1)
    pairs[:, index, 1] = lut[:, None, :].expand(n, size, size).reshape(n, -1)
    return pairs


def _check_pairs(pairs: torch.Tensor | None, n: int, bits: int,
                 device: torch.device) -> torch.Tensor | None:
    if pairs is None:
        return None
    pairs = check_weight("pairs", pairs, torch.float16, 3, device)
    if bits > PAIR_MAX_BITS or tuple(pairs.shape) != (n, 1 << (2 * bits), 2):
        raise ValueError(f"pairs: expected shape {(n, 1 << (2 * bits), 2)} (N x 4^bits x 2, the "
                         f"pair table of lut{bits}; widths <= {PAIR_MAX_BITS} only), "
                         f"got {tuple(pairs.shape)}")
    return pairs


def _pair_words(pairs: torch.Tensor | None) -> torch.Tensor | None:
    """The pair table as the kernels read it: int32 words (N, 4^b), pair i of row n the word [n, i]
    (the even weight's fp16 in its low half: little-endian)."""
    return None if pairs is None else pairs.contiguous().view(torch.int32).reshape(pairs.shape[:2])


def _check_anyprec_weight(qweight: torch.Tensor, lut: torch.Tensor, k: int, bits: int,
                          device: torch.device) -> int:
    """Validate parent planes and the b-bit LUT of an N x k weight; returns KP (padded K)."""
    qweight = check_weight("qweight", qweight, torch.int32, 3, device)
    parent, n, words = qweight.shape
    if not 1 <= parent <= MAX_PARENT_BITS:
        raise ValueError(f"qweight: expected 1..{MAX_PARENT_BITS} bit-planes, got {parent}")
    if not 1 <= bits <= parent:
        raise ValueError(f"bits: expected 1..{parent} (the parent width of qweight), got {bits!r}")
    kp = words * 32
    if kp != padded_k(k, None):
        raise ValueError(f"qweight: expected {padded_k(k, None) // 32} words per plane row for "
                         f"K={k}, got {words}")
    lut = check_weight("lut", lut, torch.float16, 2, device)
    if tuple(lut.shape) != (n, 1 << bits):
        raise ValueError(f"lut: expected shape {(n, 1 << bits)} (N x 2^bits, lut{bits}), "
                         f"got {tuple(lut.shape)}")
    return kp


def _check_block_k(block_k: int | None) -> None:
    if block_k is None or block_k < 32 or block_k & (block_k - 1):
        raise ValueError(f"config: block_k must be a power of two >= 32, got {block_k}")


def gemm_anyprec(x: torch.Tensor, qweight: torch.Tensor, lut: torch.Tensor, *, bits: int,
                 pairs: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                 config: LaunchConfig | None = None) -> torch.Tensor:
    """y = x @ W_hat.T (+ bias) at `bits`: x fp16 (M, K), parent planes (P, N, KP/32), lut{bits},
    and at bits <= PAIR_MAX_BITS its pair table (pair_table(lut)), which the one-row GEMV reads.

    `config` overrides the choice (gemm_common.run_gemm: the heuristic, or autotuning on a GPU);
    tests use it to force split-K widths.
    """
    dev = runtime.device()
    x = check_activations(x, dev)
    m, k = x.shape
    kp = _check_anyprec_weight(qweight, lut, k, bits, dev)
    n = qweight.shape[1]
    bias = check_bias(bias, n, dev)
    pairs = _check_pairs(pairs, n, bits, dev)
    if pairs is None and bits <= PAIR_MAX_BITS:
        raise ValueError(f"pairs: at {bits} bits the GEMV and the GEMM read the pair table "
                         f"(pair_table(lut{bits}), built when the weight is loaded); got None")
    out = torch.empty((m, n), dtype=torch.float16, device=x.device)
    record = dict(m=m, n=n, k=k, w_format="anyprec", w_bits=bits, group_size=None,
                  a_dtype="fp16", out_dtype="fp16", bias=bias is not None)
    args = dict(
        # pointers
        x_ptr=x, qw_ptr=qweight, lut_ptr=lut, pair_ptr=_pair_words(pairs), bias_ptr=bias,
        out_ptr=out,
        # sizes
        M=m, N=n, K=k, KP=kp,
        # strides
        stride_xm=x.stride(0), stride_qp=qweight.stride(0), stride_qn=qweight.stride(1),
        stride_ln=lut.stride(0), stride_pn=0 if pairs is None else pairs.shape[1],
        stride_om=out.stride(0),
        # constexprs
        BITS=bits, HAS_BIAS=bias is not None, PAIR_BITS=PAIR_MAX_BITS,
    )

    def check(cfg: LaunchConfig) -> None:
        check_config(cfg, _KERNELS, m, n)
        _check_block_k(cfg.block_k)

    run_gemm(gemv_anyprec_kernel, gemm_anyprec_kernel, config, record, x.device, kp, check, **args)
    return out


def dequant_anyprec(qweight: torch.Tensor, lut: torch.Tensor, *, k: int, bits: int,
                    pairs: torch.Tensor | None = None) -> torch.Tensor:
    """W_hat fp16 (N, k) at `bits`, looked up by the GEMM's own tile code, or given `pairs` by the
    one-row GEMV's pair-table code (for bit-exact tests)."""
    dev = runtime.device()
    kp = _check_anyprec_weight(qweight, lut, k, bits, dev)
    n = qweight.shape[1]
    pairs = _check_pairs(pairs, n, bits, dev)
    block_n, block_k = DEQUANT_BLOCK
    out = torch.empty((n, k), dtype=torch.float16, device=qweight.device)
    grid = (cdiv(n, block_n), cdiv(k, block_k))
    dequant_anyprec_kernel[grid](
        # pointers
        qw_ptr=qweight, lut_ptr=lut, pair_ptr=_pair_words(pairs), out_ptr=out,
        # sizes
        N=n, K=k, KP=kp,
        # strides
        stride_qp=qweight.stride(0), stride_qn=qweight.stride(1), stride_ln=lut.stride(0),
        stride_pn=0 if pairs is None else pairs.shape[1], stride_on=out.stride(0),
        # constexprs
        BITS=bits, BLOCK_N=block_n, BLOCK_K=block_k, PAIRS=pairs is not None,
    )
    return out
