"""Any-precision weights in Triton: bit planes -> codes -> fp16 W_hat tiles, from the LUT or the pair table.

Reading at b bits touches only bit-planes 0..b-1 of the parent's (P, N, KP/32) planes. At b <= 4 the
planes are transposed into codes word-wide (Any-Precision LLM's `dequant`, _transpose4) and the LUT
is gathered on the transposed words' own layout (_lut_fields); wider widths assemble codes per
weight (_wide_codes). At b <= PAIR_MAX_BITS (3) the index of each pair of weights (the bit
interleave of their codes) is assembled word-wide and both values are read with one 32-bit load
from the row's pair table (_anyprec_pair_tile; docs/formats.md, docs/kernels.md). The tiles hold the
exact fp16 values of reference/anyprec.py. Used by gemm_anyprec.py and gemv_anyprec.py.
"""

from __future__ import annotations

import triton
import triton.language as tl


def dot_pairs(capability: tuple[int, int] | None) -> bool:
    """DOT_PAIRS for a device of this compute capability (None: the interpreter): the tl.dot loops
    at <= 3 bits build their pair tile in the MMA operand's layout (_anyprec_pair_dot) on Hopper
    and later, where wgmma reads it from registers (sm_90a, 16 rows 64 x 128: 3 bits 6.14 -> 5.92,
    2 bits 5.78 -> 5.31 issue slots per weight; tiled 128 x 256 x 64 6.55 -> 5.97), and keep the
    joined-residue tile on Ampere and Ada, whose mma.sync loops it made heavier (sm_80, 16 rows:
    5.78 -> 7.20 and 5.66 -> 6.52: the per-lane residue shifts and the gathers' addresses). The
    interpreter takes it (its exactness is tested there; the other tile's by dequant_anyprec)."""
    return capability is None or capability[0] >= 9


@triton.jit
def _transpose4(words, mask, stride_qp, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                NW: tl.constexpr):
    """Any-Precision LLM's word-wide bit transpose (its `dequant`), BITS <= 4: for residue r < 4,
    q_r = OR over planes j of ((p_j >> r) & 0x11111111) << (BITS-1-j) holds in nibble t the code of
    weight 4t + r of its word (3 ops per plane and residue: 0.375 per weight and plane). The pair
    table's form (byte t of q_s the index of pair 4t + s) is _pair_tile_of's."""
    q0 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q1 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q2 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q3 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        p = tl.load(words + j * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
        q0 |= ((p >> 0) & 0x11111111) << (BITS - 1 - j)
        q1 |= ((p >> 1) & 0x11111111) << (BITS - 1 - j)
        q2 |= ((p >> 2) & 0x11111111) << (BITS - 1 - j)
        q3 |= ((p >> 3) & 0x11111111) << (BITS - 1 - j)
    return q0, q1, q2, q3


@triton.jit
def _plane_words(qw_ptr, offs_n, k0, N, KP, stride_qn, NW: tl.constexpr):
    """Plane 0's word pointers of the tile's rows and NW words from k0, their mask, the row mask."""
    offs_w = k0 // 32 + tl.arange(0, NW)
    n_mask = offs_n < N
    mask = n_mask[:, None] & (offs_w[None, :] < KP // 32)
    return qw_ptr + offs_n[:, None] * stride_qn + offs_w[None, :], mask, n_mask


@triton.jit
def _or_load(q, row_int, LO: tl.constexpr, MASK: tl.constexpr, SCALE: tl.constexpr, DTYPE: tl.constexpr):
    """The table entry of the field (q >> LO) & MASK of a row whose address is row_int (int64): its
    byte offset field << SCALE ORed into the address (the rows start at multiples of their size:
    kernels/table_rows.py), one shift and one and-or (LOP3) where an add after the mask took a
    64-bit LEA pair."""
    if LO >= SCALE:  # noqa: SIM108 (a static branch on a constexpr)
        off = (q >> (LO - SCALE)) & (MASK << SCALE)
    else:
        off = (q << (SCALE - LO)) & (MASK << SCALE)
    return tl.load((row_int | off.to(tl.int64)).to(tl.pointer_type(DTYPE)))


@triton.jit
def _lut_value(q, row_int, LO: tl.constexpr, M: tl.constexpr, WORDS: tl.constexpr):
    """One field's LUT value (fp16): from the fp16 LUT, or the low half of its 32-bit word."""
    if WORDS:
        v = _or_load(q, row_int, LO, M, 2, tl.int32).to(tl.uint16).to(tl.float16, bitcast=True)
    else:
        v = _or_load(q, row_int, LO, M, 1, tl.float16)
    return v


@triton.jit
def _lut_fields(q, row_ptr, BITS: tl.constexpr, WORDS: tl.constexpr = False):
    """The LUT values of the 8 nibble fields of q (field t: bits 4t..4t+3, masked to BITS bits) as
    (..., 8) in t order, one gather load per field on q's own layout (the values, not the codes,
    are joined, so the loads need no layout change; (t, r) of the caller's join flattens to
    weight 4t + r). WORDS: row_ptr addresses the LUT's 32-bit words (kernels/lut_words.py), each
    value the low half of its word: 4-byte gathers, which Triton's pipeliner can stage."""
    M: tl.constexpr = (1 << BITS) - 1
    row_int = row_ptr.to(tl.int64)
    v0 = _lut_value(q, row_int, 0, M, WORDS)
    v1 = _lut_value(q, row_int, 4, M, WORDS)
    v2 = _lut_value(q, row_int, 8, M, WORDS)
    v3 = _lut_value(q, row_int, 12, M, WORDS)
    v4 = _lut_value(q, row_int, 16, M, WORDS)
    v5 = _lut_value(q, row_int, 20, M, WORDS)
    v6 = _lut_value(q, row_int, 24, M, WORDS)
    v7 = _lut_value(q, row_int, 28, M, WORDS)
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
                    BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    LUT_WORDS: tl.constexpr = False):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 = lut{BITS}[n, code]: planes 0..BITS-1 read, MSB first.
    BITS <= 4: the LUT gathered on the transposed words' layout (_lut_fields; rows past N read row
    N - 1, whose outputs are never stored; LUT_WORDS: lut_ptr holds its 32-bit words, _lut_fields);
    wider: codes per weight, then one gather."""
    NW: tl.constexpr = BLOCK_K // 32
    words, mask, n_mask = _plane_words(qw_ptr, offs_n, k0, N, KP, stride_qn, NW)
    if BITS <= 4:
        q0, q1, q2, q3 = _transpose4(words, mask, stride_qp, BITS, BLOCK_N, NW)
        row_ptr = lut_ptr + (tl.minimum(offs_n, N - 1) * stride_ln)[:, None]
        w = tl.join(tl.join(_lut_fields(q0, row_ptr, BITS, LUT_WORDS),
                            _lut_fields(q2, row_ptr, BITS, LUT_WORDS)),
                    tl.join(_lut_fields(q1, row_ptr, BITS, LUT_WORDS),
                            _lut_fields(q3, row_ptr, BITS, LUT_WORDS)))
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
    row_int = row_ptr.to(tl.int64)
    w0 = _or_load(q, row_int, 0, 0xFF, 2, tl.int32)
    w1 = _or_load(q, row_int, 8, 0xFF, 2, tl.int32)
    w2 = _or_load(q, row_int, 16, 0xFF, 2, tl.int32)
    w3 = _or_load(q, row_int, 24, 0xFF, 2, tl.int32)
    return tl.join(tl.join(w0, w2), tl.join(w1, w3))


@triton.jit
def _pair_halves(pw, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Pair-table words (int32, pairs in column order) -> W_hat (BLOCK_N, BLOCK_K) fp16: each word's
    low half is the even weight's value, its high half the odd weight's."""
    pw = pw.to(tl.uint32, bitcast=True)
    lo = (pw & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (pw >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))


@triton.jit
def _pair_planes(qw_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, BITS: tl.constexpr,
                 NW: tl.constexpr, k_end=0, BOUNDED: tl.constexpr = False):
    """Planes 0..BITS-1 (BITS <= PAIR_MAX_BITS) of the tile's NW words a row from k0, (BLOCK_N, NW)
    uint32 each (a plane past BITS repeats plane 0 and is never read). BOUNDED (a prefetch): a tile
    at or past k_end (its program's split end) reads 0s, no memory."""
    words, mask, _ = _plane_words(qw_ptr, offs_n, k0, N, KP, stride_qn, NW)
    if BOUNDED:  # broadcast so the interpreter's mask stays a block of booleans
        mask = mask & ((tl.zeros((1, NW), dtype=tl.int32) + k0) < k_end)
    p0 = tl.load(words, mask=mask, other=0).to(tl.uint32, bitcast=True)
    p1 = p0
    p2 = p0
    if BITS > 1:
        p1 = tl.load(words + stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
    if BITS > 2:
        p2 = tl.load(words + 2 * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
    return p0, p1, p2


@triton.jit
def _pair_tile_of(p0, p1, p2, pair_ptr, offs_n, N, stride_pn, BITS: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """W_hat (BLOCK_N, BLOCK_K) fp16 of a tile from its planes (_pair_planes) and the per-row pair
    table (BITS <= PAIR_MAX_BITS): pair i's index code_{2i} << BITS | code_{2i+1} (bit-interleaved)
    is assembled word-wide (byte t of the word for residue s holds the index of pair 4t + s,
    _pair_term), then one 32-bit load per two weights of pairs[n, index] = lut[code_{2i}] |
    lut[code_{2i+1}] << 16 (pair_ptr: the table's int32 words), split into its fp16 halves."""
    NW: tl.constexpr = BLOCK_K // 32
    q0 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q1 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q2 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    q3 = tl.zeros((BLOCK_N, NW), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        if j == 0:
            p = p0
        elif j == 1:
            p = p1
        else:
            p = p2
        q0 |= _pair_term(p, j, 0, BITS)
        q1 |= _pair_term(p, j, 1, BITS)
        q2 |= _pair_term(p, j, 2, BITS)
        q3 |= _pair_term(p, j, 3, BITS)
    # rows past N read row N - 1 (their outputs are never stored), so the loads need no mask
    row_ptr = pair_ptr + (tl.minimum(offs_n, N - 1) * stride_pn)[:, None]
    # (..., t, s) flattens to pair 4t + s of the word: (BLOCK_N, NW, 16), pair 16w + 4t + s
    pw = tl.join(tl.join(_lookup4(q0, row_ptr), _lookup4(q2, row_ptr)),
                 tl.join(_lookup4(q1, row_ptr), _lookup4(q3, row_ptr)))
    return _pair_halves(tl.reshape(pw, (BLOCK_N, NW, 16)), BLOCK_N, BLOCK_K)


@triton.jit
def _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_pn,
                       BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """W_hat[offs_n, k0:k0+BLOCK_K] fp16 from the per-row pair table (BITS <= PAIR_MAX_BITS): the
    tile's planes (_pair_planes) looked up by pairs (_pair_tile_of)."""
    p0, p1, p2 = _pair_planes(qw_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, BITS, BLOCK_K // 32)
    return _pair_tile_of(p0, p1, p2, pair_ptr, offs_n, N, stride_pn, BITS, BLOCK_N, BLOCK_K)


@triton.jit
def _anyprec_pair_dot(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_pn,
                      BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """_anyprec_pair_tile built for a tl.dot operand: the residue s of _pair_term is a broadcast
    vector (BLOCK_N, words, 4) instead of four joined words, so Triton's layout pass carries the
    MMA fragment's layout back to the planes: pair 4t + s of a word is columns 8t + 2s, 8t + 2s + 1,
    which thread s of a quad holds in register t, so each thread assembles the one residue word
    whose bytes index its four pairs of the word (the same 3 ops per plane and residue as the
    joined form, none repeated) and its four 32-bit pair-table loads land as the fragment's fp16
    pairs: no shared-memory round trip before the dot. The same values as _anyprec_pair_tile."""
    NW: tl.constexpr = BLOCK_K // 32
    words, mask, _ = _plane_words(qw_ptr, offs_n, k0, N, KP, stride_qn, NW)
    s2 = 2 * tl.arange(0, 4).to(tl.uint32)
    q = tl.zeros((BLOCK_N, NW, 4), dtype=tl.uint32)
    for j in tl.static_range(BITS):
        p = tl.load(words + j * stride_qp, mask=mask, other=0).to(tl.uint32, bitcast=True)
        q |= ((p[:, :, None] >> s2[None, None, :]) & 0x03030303) << (2 * (BITS - 1 - j))
    row_ptr = pair_ptr + (tl.minimum(offs_n, N - 1) * stride_pn)[:, None, None]
    # (BLOCK_N, NW, s, t) -> (BLOCK_N, NW, t, s): pair 4t + s of the word in column order
    pw = tl.permute(tl.reshape(_lookup4(q, row_ptr), (BLOCK_N, NW, 4, 4)), (0, 1, 3, 2))
    return _pair_halves(pw, BLOCK_N, BLOCK_K)


@triton.jit
def _anyprec_tile(qw_ptr, lut_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                  stride_pn, BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  PAIR_BITS: tl.constexpr, LUT_WORDS: tl.constexpr = False,
                  DOT: tl.constexpr = False):
    """The W_hat tile every path multiplies: from the pair table at BITS <= PAIR_BITS, else from
    the LUT (the same exact fp16 values either way). DOT (the tile of a tl.dot): the pair table's
    tile in the dot operand's layout (_anyprec_pair_dot)."""
    if DOT and BITS <= PAIR_BITS:
        w = _anyprec_pair_dot(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                              stride_pn, BITS, BLOCK_N, BLOCK_K)
    elif BITS <= PAIR_BITS:
        w = _anyprec_pair_tile(qw_ptr, pair_ptr, offs_n, k0, N, KP, stride_qp, stride_qn,
                               stride_pn, BITS, BLOCK_N, BLOCK_K)
    else:
        w = _anyprec_w_tile(qw_ptr, lut_ptr, offs_n, k0, N, KP, stride_qp, stride_qn, stride_ln,
                            BITS, BLOCK_N, BLOCK_K, LUT_WORDS)
    return w
