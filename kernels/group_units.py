"""A group-quantized weight's packed words -> units (docs/formats.md's pair layout), in Triton.

A chunk of 32 codes fills b int32 words; its units hold P codes each (the words at b in {2, 4, 8}; at
b = 3 the three words and a fourth unit gathered from their top nibbles). Shared by the one-row
tiles (group_dequant.py) and the dot-operand tile (dot_tile.py).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _join4(a, b, c, d):
    """(..., 4) in the order a, b, c, d (join(join(a, c), join(b, d)) flattens that way)."""
    return tl.join(tl.join(a, c), tl.join(b, d))


@triton.jit
def _chunk_word(base, i: tl.constexpr, mask, MASKED: tl.constexpr = True):
    """Word i of every 32-code chunk of the tile, as uint32 (0 where masked; MASKED False: `base`
    must address words inside the weight, as _group_w_at's and _group_codes' clamped rows do)."""
    if MASKED:  # noqa: SIM108 (a static branch on a constexpr)
        w = tl.load(base + i, mask=mask, other=0)
    else:
        w = tl.load(base + i)
    return w.to(tl.uint32, bitcast=True)


@triton.jit
def _group_units(qw_ptr, offs_n, k0, N, KP, stride_qn, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, MASKED: tl.constexpr = True,
                 UNIT3_HIGH: tl.constexpr = False):
    """The units of columns k0.. (k0 a multiple of 32; 0 outside N x KP) as (BLOCK_N, chunks, U)
    uint32 (docs/formats.md: U = b words at b in {2, 4, 8}, 4 at 3 bits), with each chunk's first
    column (a chunk never straddles a group: 32 divides G).

    Every width loads the BITS words of a chunk as BITS tiles (word i of every chunk) and joins them
    into the chunk's units (the words; at 3 bits unit 3 is gathered from the top nibbles of the
    three). Loading a (BLOCK_N, words) tile instead let LLVM's vectorizer pair the low halves of
    different words into one f16x2 register, two PRMTs per code pair (about 0.9 ALU lanes per
    weight in the sm_90a SASS); with joined units each pair's halves stay in one register.
    UNIT3_HIGH (the dot tile on Hopper, dot_tile.unit3_high): unit 3 at bits 4..15 of each half
    instead of 0..11, w2's nibble where it is and two shifts for w0's and w1's (three otherwise).
    """
    n_mask = offs_n < N
    NC: tl.constexpr = BLOCK_K // 32
    offs_c = k0 // 32 + tl.arange(0, NC)
    mask = n_mask[:, None] & (offs_c[None, :] < KP // 32)
    base = qw_ptr + offs_n[:, None] * stride_qn + BITS * offs_c[None, :]
    if not MASKED:  # rows past N read row N - 1 (never stored); every chunk is inside KP
        base = qw_ptr + tl.minimum(offs_n, N - 1)[:, None] * stride_qn + BITS * offs_c[None, :]
    w0 = _chunk_word(base, 0, mask, MASKED)
    w1 = _chunk_word(base, 1, mask, MASKED)
    if BITS == 2:
        units = tl.join(w0, w1)
    else:
        w2 = _chunk_word(base, 2, mask, MASKED)
        if BITS == 3 and UNIT3_HIGH:  # unit 3's nibbles at bits 4, 8, 12 (dot_tile._dot_w)
            w3 = ((w0 >> 8) & 0x00F000F0) | ((w1 >> 4) & 0x0F000F00) | (w2 & 0xF000F000)
        elif BITS == 3:  # unit 3 from the three words' top nibbles (reference/packing.py)
            w3 = ((w0 >> 12) & 0x000F000F) | ((w1 >> 8) & 0x00F000F0) | ((w2 >> 4) & 0x0F000F00)
        else:
            w3 = _chunk_word(base, 3, mask, MASKED)
        if BITS == 8:  # three joins flatten (a, b, c) to 4a + 2b + c
            units = tl.join(tl.join(tl.join(w0, _chunk_word(base, 4, mask)),
                                    tl.join(w2, _chunk_word(base, 6, mask))),
                            tl.join(tl.join(w1, _chunk_word(base, 5, mask)),
                                    tl.join(w3, _chunk_word(base, 7, mask))))
        else:  # join(join(a, c), join(b, d)) flattens to a, b, c, d
            units = tl.join(tl.join(w0, w2), tl.join(w1, w3))
    U: tl.constexpr = 4 if BITS == 3 else BITS
    return tl.reshape(units, (BLOCK_N, NC, U)), offs_c * 32
