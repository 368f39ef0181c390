"""The group formats' dequantization in Triton: packed int32 words -> fp16 (q - z) s, or (q - z) 2^-E.

Codes are extracted two at a time (docs/formats.md's pair layout: even codes of a unit in the low
16-bit half, odd codes in the high half; b = 3 as 32 codes per 3-word triple): one shift and one mask
per pair at 8 and 4 bits (and in the tiled GEMM); at 3 and 2 bits (GEMVs, exact parts) one mask per
pair taken at its own bits of the fp16 mantissa (_at). Scaled, the tile is exactly the bits of
reference/group_quant.py::dequantize_group; unscaled it is (q - z) 2^-E, exact, for the one-row
GEMV's fp16 partial sums (kernels/gemv_group.py). Used by gemm_group.py and gemv_group.py.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mpsim.kernels.dot_tile import _dot_units, _dot_w
from mpsim.kernels.group_units import _chunk_word, _group_units, _join4


@triton.jit
def _pair(units, j: tl.constexpr, BITS: tl.constexpr, E: tl.constexpr):
    """Pair j of every unit: (unit >> b*j) & (2^b - 1) * 0x10001 | the exponent of 2^(10-E) per half
    (0x64006400 at E = 0): each half is 2^(10-E) + code * 2^-E (uint32)."""
    MAGIC: tl.constexpr = ((25 - E) << 10) * 0x10001
    return ((units >> (BITS * j)) & (((1 << BITS) - 1) * 0x10001)) | MAGIC


@triton.jit
def _pairs_fp16(units, BITS: tl.constexpr, E: tl.constexpr, SWAP: tl.constexpr = False):
    """(..., U) uint32 units -> (..., U, P) fp16 (1024 + code) 2^-E, P codes per unit (packing.py).

    One shift and one mask per PAIR of codes (_pair): the 16-bit halves are the fp16 numbers
    1024 + code 2j (low) and 1024 + code 2j+1 (high). The pairs are joined with immediate shifts
    (a broadcast shift vector spreads the pairs of one word over several threads), and the halves
    taken as two 16-bit lanes: a 32->16-bit bitcast is what the interpreter cannot do; the compiler
    reads these truncations as the halves of the one register. SWAP: each pair's halves in the
    other order (high, low: column c holds code c ^ 1), which sm_80's ptxas pairs without moves
    (kernels/gemv_group.py, PAIR_SWAP).
    """
    NP: tl.constexpr = (8 if BITS == 3 else 32 // BITS) // 2
    if NP == 2:
        pair = tl.join(_pair(units, 0, BITS, E), _pair(units, 1, BITS, E))
    elif NP == 4:  # join(join(a, c), join(b, d)) flattens to a, b, c, d
        pair = tl.join(tl.join(_pair(units, 0, BITS, E), _pair(units, 2, BITS, E)),
                       tl.join(_pair(units, 1, BITS, E), _pair(units, 3, BITS, E)))
    else:
        pair = tl.join(tl.join(tl.join(_pair(units, 0, BITS, E), _pair(units, 4, BITS, E)),
                               tl.join(_pair(units, 2, BITS, E), _pair(units, 6, BITS, E))),
                       tl.join(tl.join(_pair(units, 1, BITS, E), _pair(units, 5, BITS, E)),
                               tl.join(_pair(units, 3, BITS, E), _pair(units, 7, BITS, E))))
    lo = pair.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (pair >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.join(hi, lo) if SWAP else tl.join(lo, hi)


@triton.jit
def _at(word, k: tl.constexpr, BITS: tl.constexpr, c0, E: tl.constexpr):
    """The code pair at bits k.. of each 16-bit half of `word` (k + BITS <= 10), without a shift:
    OR-ing the fp16 exponent of 2^(10-k-E) makes each half exactly (2^(10-k) + code) 2^-E (the code
    is the mantissa's bits k..); minus (2^(10-k) + z) 2^-E (from c0: at 3 bits, and at 2 bits with
    E > 0, c0 = (1024 + z) 2^-E and an exact fp16 add; at 2 bits with E = 0 c0 = 1024 + z and the
    bits (0x6400 + z) << k plus a constant, off the fp32 pipe) that is (q - z) 2^-E exactly; times s
    (1.0 when unscaled: folded away) it is rounded once, as the reference does. In the partial
    sums (E > 0) the integer form issued more (2 bits, 256 x 32: 3.45 against 3.39 slots per
    weight). Returns the low and high halves (2^(10-k) + code) 2^-E and c, fp16 of one shape; the
    caller subtracts and scales after joining them (_late)."""
    MAGIC: tl.constexpr = ((25 - k - E) << 10) * 0x10001
    FP: tl.constexpr = E > 0
    p = (word & ((((1 << BITS) - 1) << k) * 0x10001)) | MAGIC
    lo = p.to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (p >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    if k == 0 and (E == 0 or BITS == 3 or FP):
        c = c0
    elif BITS == 3 or FP:
        c = c0 + ((1 << (10 - k)) - 1024.0) / (1 << E)
    else:
        C: tl.constexpr = (((25 - k - E) << 10) - (0x6400 << k)) & 0xFFFF
        c = ((c0.to(tl.uint16, bitcast=True) << k) + C).to(tl.uint16).to(tl.float16, bitcast=True)
    return lo, hi, tl.broadcast_to(c, lo.shape)


@triton.jit
def _late(lo, hi, c, s, SWAP: tl.constexpr = False):
    """(join(lo, hi) - join(c, c)) s: each pair's low and high halves adjacent when subtracted, so
    that sm_80's ptxas (scalar fp16 in the PTX there: kernels/gemv_group.py pair_swap) pairs a code
    pair's two halves into one HADD2 rather than the low halves of two rows' words with PRMTs
    between; SWAP: each pair's halves in the other order (high, low), as _pairs_fp16's. sm_80, one
    row, 256 x 32, issue slots per weight: 3 bits 4.57 -> 4.00, 2 bits 4.36 -> 3.76 (late alone:
    4.58 and 4.36, the PRMTs moved to the halves' order; with the swap: the sm_90a count unchanged,
    3.58 and 3.39). s (BLOCK_N, G): one per row and group chunk."""
    q = tl.join(hi, lo) if SWAP else tl.join(lo, hi)
    return (q - tl.join(c, c)) * s[:, :, None, None, None, None, None]


@triton.jit
def _dequant2(w0, w1, zc, s, E: tl.constexpr, SWAP: tl.constexpr = False):
    """2-bit chunk (two words): pairs 0..3 of a word at bits 0, 2, 4, 6 as they are, pairs 4..7 at
    the same bits of word >> 8: one shift per 16 codes (_at). (BLOCK_N, NC, 32) fp16 W_hat."""
    u = tl.join(w0, w1)
    t = u >> 8
    zc = zc[:, :, None]  # zc: 1024 + z (_at's c0)
    l0, h0, c0 = _at(u, 0, 2, zc, E)
    l1, h1, c1 = _at(u, 2, 2, zc, E)
    l2, h2, c2 = _at(u, 4, 2, zc, E)
    l3, h3, c3 = _at(u, 6, 2, zc, E)
    l4, h4, c4 = _at(t, 0, 2, zc, E)
    l5, h5, c5 = _at(t, 2, 2, zc, E)
    l6, h6, c6 = _at(t, 4, 2, zc, E)
    l7, h7, c7 = _at(t, 6, 2, zc, E)
    lo = tl.join(_join4(l0, l2, l4, l6), _join4(l1, l3, l5, l7))
    hi = tl.join(_join4(h0, h2, h4, h6), _join4(h1, h3, h5, h7))
    return _late(lo, hi, tl.join(_join4(c0, c2, c4, c6), _join4(c1, c3, c5, c7)), s, SWAP)


@triton.jit
def _unit3(w, zc, E: tl.constexpr):
    """Pairs 0..3 of a 3-bit word's unit (low, high halves, offsets c: _at): bits 0, 3, 6 as they
    are, 9 shifted."""
    l0, h0, c0 = _at(w, 0, 3, zc, E)
    l1, h1, c1 = _at(w, 3, 3, zc, E)
    l2, h2, c2 = _at(w, 6, 3, zc, E)
    l3, h3, c3 = _at(w >> 9, 0, 3, zc, E)
    return l0, h0, c0, l1, h1, c1, l2, h2, c2, l3, h3, c3


@triton.jit
def _dequant3(w0, w1, w2, zc, s, E: tl.constexpr, SWAP: tl.constexpr = False):
    """3-bit chunk (three words): units 0..2 are the words (_unit3); unit 3 is in their top nibbles,
    at bits 3..6 of w >> 9: pair 0 bits 3..5 of w0 >> 9, pair 3 bits 4..6 of w2 >> 9, pairs 1 and
    2 straddle two nibbles, joined at bits 6..8 and 5..7 with one more shift. (BN, NC, 32) fp16."""
    a0, b0, o0, a1, b1, o1, a2, b2, o2, a3, b3, o3 = _unit3(w0, zc, E)
    c0, d0, p0, c1, d1, p1, c2, d2, p2, c3, d3, p3 = _unit3(w1, zc, E)
    e0, f0, r0, e1, f1, r1, e2, f2, r2, e3, f3, r3 = _unit3(w2, zc, E)
    s0, s1, s2 = w0 >> 9, w1 >> 9, w2 >> 9
    g0, k0, t0 = _at(s0, 3, 3, zc, E)
    g1, k1, t1 = _at((s0 & 0x00400040) | ((s1 << 4) & 0x01800180), 6, 3, zc, E)
    g2, k2, t2 = _at((s1 & 0x00600060) | ((s2 << 4) & 0x00800080), 5, 3, zc, E)
    g3, k3, t3 = _at(s2, 4, 3, zc, E)
    lo = _join4(_join4(a0, c0, e0, g0), _join4(a1, c1, e1, g1), _join4(a2, c2, e2, g2),
                _join4(a3, c3, e3, g3))
    hi = _join4(_join4(b0, d0, f0, k0), _join4(b1, d1, f1, k1), _join4(b2, d2, f2, k2),
                _join4(b3, d3, f3, k3))
    c = _join4(_join4(o0, p0, r0, t0), _join4(o1, p1, r1, t1), _join4(o2, p2, r2, t2),
               _join4(o3, p3, r3, t3))
    return _late(lo, hi, c, s, SWAP)


@triton.jit
def _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, E: tl.constexpr,
                 SWAP: tl.constexpr = False, MASKED: tl.constexpr = True):
    """(1024 + code) 2^-E (fp16) of columns k0.. (_group_units), 1024 outside N x KP, as
    (BLOCK_N, chunks, 32), with each chunk's first column."""
    units, first_col = _group_units(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N, BLOCK_K,
                                    MASKED)
    qh = tl.reshape(_pairs_fp16(units, BITS, E, SWAP), (BLOCK_N, BLOCK_K // 32, 32))
    return qh, first_col


@triton.jit
def _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                  BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, AT_BITS: tl.constexpr, SCALED: tl.constexpr = True,
                  E: tl.constexpr = 0, k_group=None, SWAP: tl.constexpr = False, sz_ptr=None,
                  SZ_WORDS: tl.constexpr = False, DOT: tl.constexpr = False,
                  UNIT3_HIGH: tl.constexpr = False):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = fp16(float32(q - z) * float32(s)), one (s, z) per group;
    unscaled (SCALED False): (q - z) 2^-E, exact (the one-row GEMV's partial sums, gemv_group.py).

    No int-to-float conversion: extracted pairs are fp16 numbers (c + q) 2^-E, c = 1024
    (_pairs_fp16) or 2^(10-k) (_at, AT_BITS at 3 and 2 bits: GEMV and exact parts; the tiled GEMM
    keeps the shifts, the other form's SASS being larger at its tiles); minus (c + z) 2^-E (exact)
    that is (q - z) 2^-E, and one fp16 multiply by s (E = 0) rounds the exact product once, as the
    reference's exact fp32 product rounded to fp16 does. Scales and zeros load once per chunk (or
    row), not per weight; with k_group (a column of the same group: the one-row GEMV's run start)
    every K tile of a run loads them from one address, so the compiler loads z and derives its
    offsets once per run (sm_90a, 256 x 32: 3.95 -> 3.75, 3.87 -> 3.58, 3.63 -> 3.39 slots per
    weight at 4, 3, 2 bits). With k_group the code words load unmasked, rows past N clamped to
    row N - 1 (their sums are never stored; a run never passes KP), as gemv_group_asm.py does:
    each masked load zeroed its registers first (CS2R/IMAD.MOV in the loop); one row, 256 x 32,
    issue slots per weight sm_90a 3.75 / 3.58 / 3.39 -> 3.64 / 3.50 / 3.33, sm_80 4.15 / 4.00 /
    3.76 -> 4.00 / 3.84 / 3.66 at 4 / 3 / 2 bits. SWAP: the columns of each pair in the other
    order, column c holding weight k0 + (c ^ 1) (_pairs_fp16, _late). SZ_WORDS: s and z read from
    sz_ptr, one 32-bit word per row and group (_group_sz; kernels/sz_words.py). DOT (scaled, E = 0:
    the tile of a tl.dot, 2..16 rows and the tiled GEMM): every width's pairs in the dot operand's
    layout (_dot_w), AT_BITS and SWAP not taken; UNIT3_HIGH: dot_tile.unit3_high's 3-bit unit 3.
    """
    if DOT:
        tl.static_assert(SCALED and E == 0 and k_group is None, "DOT: the scaled W_hat tile")
        units = _dot_units(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N, BLOCK_K,
                           UNIT3_HIGH)
        if BLOCK_K <= GROUP:  # one (s, z) per row; k0 < KP, so the group is inside the row
            offs_g = k0 // GROUP + tl.arange(0, 1)
        else:  # a tile past KP (its words read as 0, x as 0) reads the last group's (s, z)
            offs_g = tl.minimum((k0 + 32 * tl.arange(0, BLOCK_K // 32)) // GROUP, KP // GROUP - 1)
        s, z = _group_sz(s_ptr, z_ptr, sz_ptr, offs_n, offs_g, N, KP // GROUP, stride_sn,
                         SZ_WORDS, G_MASKED=False)
        w = _dot_w(units, z + 1024.0, s, BITS, BLOCK_N, BLOCK_K, UNIT3_HIGH)
    elif AT_BITS and BITS <= 3:
        w = _group_w_at(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                        BITS, GROUP, BLOCK_N, BLOCK_K, SCALED, E, k_group, SWAP, sz_ptr, SZ_WORDS)
    else:
        qh, first_col = _group_codes(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS, BLOCK_N,
                                     BLOCK_K, E, SWAP, k_group is None)
        if k_group is not None:  # noqa: SIM108 (a static branch) one address per run
            offs_g = k_group // GROUP + tl.arange(0, 1)
        else:
            offs_g = first_col // GROUP
        if SCALED:
            s, z = _group_sz(s_ptr, z_ptr, sz_ptr, offs_n, offs_g, N, KP // GROUP, stride_sn,
                             SZ_WORDS)
            w = (qh - ((z + 1024.0) * (1.0 / (1 << E)))[:, :, None]) * s[:, :, None]
        else:  # the one-row partial sums: z alone
            z = _group_z(z_ptr, offs_n, offs_g, N, KP // GROUP, stride_sn)
            w = qh - ((z + 1024.0) * (1.0 / (1 << E)))[:, :, None]
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _group_w_at(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn,
                BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, SCALED: tl.constexpr, E: tl.constexpr, k_group=None,
                SWAP: tl.constexpr = False, sz_ptr=None, SZ_WORDS: tl.constexpr = False):
    """_group_w_tile at 2 and 3 bits, pairs taken at their own bits (_dequant2/3): (BN, NC, 32)."""
    NC: tl.constexpr = BLOCK_K // 32
    offs_c = k0 // 32 + tl.arange(0, NC)
    n_mask = offs_n < N
    mask = n_mask[:, None] & (offs_c[None, :] < KP // 32)
    base = qw_ptr + offs_n[:, None] * stride_qn + BITS * offs_c[None, :]
    if k_group is not None:  # the caller's column of the same group (one address per run)
        offs_g = k_group // GROUP + tl.arange(0, 1)
    elif BLOCK_K <= GROUP:  # one group per row: (s, z) per row
        offs_g = k0 // GROUP + tl.arange(0, 1)
    else:
        offs_g = offs_c * 32 // GROUP
    if SCALED:
        s, z = _group_sz(s_ptr, z_ptr, sz_ptr, offs_n, offs_g, N, KP // GROUP, stride_sn, SZ_WORDS)
    else:  # a splat of ones, the multiplies by it folded away (the one-row partial sums)
        z = _group_z(z_ptr, offs_n, offs_g, N, KP // GROUP, stride_sn)
        s = tl.full(z.shape, 1.0, tl.float16)
    zc = z + 1024.0  # c0 of _at
    MASKED: tl.constexpr = k_group is None
    if not MASKED:  # a run of the partial sums: rows clamped, words unmasked (_group_w_tile)
        base = qw_ptr + tl.minimum(offs_n, N - 1)[:, None] * stride_qn + BITS * offs_c[None, :]
    w0 = _chunk_word(base, 0, mask, MASKED)
    w1 = _chunk_word(base, 1, mask, MASKED)
    if BITS == 2:
        w = _dequant2(w0, w1, zc * (1.0 / (1 << E)), s, E, SWAP)
    else:
        w = _dequant3(w0, w1, _chunk_word(base, 2, mask, MASKED), zc * (1.0 / (1 << E)), s, E, SWAP)
    return w


@triton.jit
def _group_sz(s_ptr, z_ptr, sz_ptr, offs_n, offs_g, N, NG, stride_sn, WORDS: tl.constexpr,
              G_MASKED: tl.constexpr = True):
    """(s, z) of rows offs_n at groups offs_g, each (BLOCK_N, len(offs_g)) fp16, 0 outside N x NG
    (G_MASKED False: offs_g must be inside NG, only the rows are masked: a mask that changes with
    the K tile costs the pipelined 2..16-row loop its predicate bookkeeping every trip, sm_90a int4
    16 rows 64 x 128: 305 -> 281 instructions a trip).
    WORDS: both from one 32-bit word per row and group at sz_ptr (s the low half, z the high:
    kernels/sz_words.py), a 4-byte load that Triton's pipeliner stages with cp.async, its halves
    the register's two fp16 lanes; else two 2-byte loads, which stay register loads consumed in
    their own K trip (docs/kernels.md#staged-scales)."""
    if G_MASKED:
        mask = (offs_n[:, None] < N) & (offs_g[None, :] < NG)
    else:
        mask = (offs_n[:, None] < N) & (offs_g[None, :] >= 0)
    offs = offs_n[:, None] * stride_sn + offs_g[None, :]
    if WORDS:
        sz = tl.load(sz_ptr + offs, mask=mask, other=0).to(tl.uint32, bitcast=True)
        s = sz.to(tl.uint16).to(tl.float16, bitcast=True)
        z = (sz >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    else:
        s = tl.load(s_ptr + offs, mask=mask, other=0.0)
        z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    return s, z


@triton.jit
def _group_z(z_ptr, offs_n, offs_g, N, NG, stride_sn):
    """z alone (the one-row partial sums, unscaled), 2-byte loads, 0 outside N x NG."""
    mask = (offs_n[:, None] < N) & (offs_g[None, :] < NG)
    return tl.load(z_ptr + offs_n[:, None] * stride_sn + offs_g[None, :], mask=mask, other=0.0)
