"""Decode attention's int8/int4 K and V with the dequantization folded out of the per-element loop.

A cached row is x_j = c_j s + z (docs/formats.md: codes c, per-token scale s and zero z). Instead of
dequantizing every element (a conversion, an FMA, an fp16 rounding), the kernel reads the codes
two at a time from whole 32-bit words and applies s and z once per token:

    q . k_j  = s_j (q . c_j) + z_j sum(q)                       (scores)
    sum_j p_j v_j = sum_j (p_j s_j) c_j + sum_j p_j z_j         (weighted values)

Codes come out of a word as fp16 pairs without a shift where the field allows: (w & field << k) |
the exponent of 2^(10-k) in each 16-bit half is the fp16 number 2^(10-k) + code (k + bits <= 10),
and minus 2^(10-k) (an exact fp16 subtraction) the code itself. int4: pairs at bits 0 and 4 of w
and of w >> 8 (elements (0, 4), (1, 5), (2, 6), (3, 7) of the word's 8); int8: bits 0 of w and
w >> 8 (elements (0, 2), (1, 3)). The pairs are joined back into the row's natural element order,
so the packed layout is the one kv_quant writes (unchanged). Per element that leaves a share of a
mask/or, the subtraction (one per pair) and the multiply-add of the dot.

The folded sums compute with the exact x_j = c_j s + z, not its fp16 rounding fp16(c s + z) that
`load_kv_tile` (and reference/kv_quant.py) return; the bound in reference/tolerance.py
(folded_decode_bound) covers the difference, and reference/attention_decode.py::decode_folded_f32
computes the same order of operations (docs/numerics.md).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _codes_at(w, k: tl.constexpr, BITS: tl.constexpr, SUB: tl.constexpr):
    """The code pair at bits k.. of each 16-bit half of w (uint32), as fp16 (low half, high half):
    the codes themselves (one mask/or and one HADD2 per pair) or, with SUB, the subnormal fp16
    numbers code * 2^(k-24) (one mask per pair; kv_code_scale undoes the power of two)."""
    p = w & ((((1 << BITS) - 1) << k) * 0x10001)
    if not SUB:
        p = p | ((25 - k) << 10) * 0x10001  # fp16 2^(10-k) + code in each half
    lo = p.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (p >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    if not SUB:  # minus 2^(10-k): exact
        lo, hi = lo - (1 << (10 - k)), hi - (1 << (10 - k))
    return lo, hi


@triton.jit
def kv_codes(data_ptr, row_off, row_mask, D, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_D: tl.constexpr, SUB: tl.constexpr = False):
    """(BLOCK_N, BLOCK_D) fp16 codes of cache rows in natural element order, 0 past D and in masked
    rows: the integers themselves, or with SUB code_d * 2^(k_d - 24) (exact subnormals; kv_code_scale
    holds 2^(24 - k_d)). data_ptr: the cache's bytes as int32 words; row_off: each row's first word."""
    EPW: tl.constexpr = 32 // BITS  # elements per word
    W: tl.constexpr = BLOCK_D // EPW
    offs_w = tl.arange(0, W)
    m = row_mask[:, None] & (offs_w < D // EPW)[None, :]
    w = tl.load(data_ptr + row_off[:, None] + offs_w[None, :], mask=m, other=0)
    w = w.to(tl.uint32, bitcast=True)
    t = w >> 8
    if BITS == 4:
        l0, h0 = _codes_at(w, 0, 4, SUB)
        l1, h1 = _codes_at(w, 4, 4, SUB)
        l2, h2 = _codes_at(t, 0, 4, SUB)
        l3, h3 = _codes_at(t, 4, 4, SUB)
        # (BN, W, half, 4): join(join(a, c), join(b, d)) flattens to a, b, c, d
        c = tl.join(tl.join(tl.join(l0, h0), tl.join(l2, h2)),
                    tl.join(tl.join(l1, h1), tl.join(l3, h3)))
    else:
        l0, h0 = _codes_at(w, 0, 8, SUB)
        l1, h1 = _codes_at(t, 0, 8, SUB)
        c = tl.join(tl.join(l0, h0), tl.join(l1, h1))  # (BN, W, half, 2)
    return tl.reshape(c, (BLOCK_N, BLOCK_D))


@triton.jit
def kv_code_scale(BITS: tl.constexpr, BLOCK_D: tl.constexpr):
    """(BLOCK_D,) fp32 2^(24 - k_d): kv_codes(SUB=True) times it is the code. int8: k = 0; int4:
    k = 0 at even elements (bits 0 of w and w >> 8), 4 at odd ones (bits 4)."""
    e = tl.arange(0, BLOCK_D)
    if BITS == 4:
        f = tl.where(e % 2 == 0, 16777216.0, 1048576.0)
    else:
        f = tl.full([BLOCK_D], 16777216.0, tl.float32)
    return f


@triton.jit
def kv_scale_zero(scale_ptr, zero_ptr, sz_off, row_mask):
    """Per-token scale and zero as fp32 (0 in masked rows)."""
    s = tl.load(scale_ptr + sz_off, mask=row_mask, other=0.0).to(tl.float32)
    z = tl.load(zero_ptr + sz_off, mask=row_mask, other=0.0).to(tl.float32)
    return s, z


@triton.jit
def folded_scores(q, qsum, c, s, z, BLOCK_G: tl.constexpr):
    """q (BLOCK_G, D) . (c s + z)^T -> (BLOCK_G, BLOCK_N) fp32 as s (q . c) + z sum(q). One query
    row: q fp32 times kv_code_scale and c the subnormal codes (kv_codes SUB), each product q_d c_d
    exact; more rows: q fp16 and c the fp16 codes of a tl.dot."""
    if BLOCK_G == 1:
        dot = tl.sum(tl.sum(q, 0)[None, :] * c.to(tl.float32), 1)[None, :]
    else:
        dot = tl.dot(q, tl.trans(c))
    return dot * s[None, :] + qsum[:, None] * z[None, :]


@triton.jit
def folded_values(p, c, s, z):
    """p (BLOCK_G, BLOCK_N) fp32 @ (c s + z) -> (BLOCK_G, D) fp32 as (p s) @ c + sum_j p_j z_j, c
    the fp16 codes of a tl.dot (P s rounded to fp16)."""
    ps = p * s[None, :]
    zsum = tl.sum(p * z[None, :], 1)
    pv = tl.dot(ps.to(tl.float16), c)
    return pv + zsum[:, None]


@triton.jit
def values_lanes(p, c, s, z):
    """One query row: p (1, BLOCK_N) fp32, c subnormal codes (kv_codes SUB) -> the lanes' terms
    fl(p_j s_j) 2^24 c_jd 2^(k_d - 24) = fl(p_j s_j) c_jd 2^k_d (BLOCK_N, D) fp32 (exact powers of
    two) and sum_j p_j z_j (1,); the caller accumulates them per lane, sums the lanes after the loop
    and divides by 2^k_d (kv_code_scale / 2^24)."""
    ps = tl.sum(p * s[None, :], 0) * 16777216.0
    return ps[:, None] * c.to(tl.float32), tl.sum(p * z[None, :], 1)
