"""Packing b-bit codes (b in 2, 3, 4, 8) into int32 words along K, as docs/formats.md pins it.

The layout is built for pair extraction: a GEMV takes two codes out of a whole 32-bit word with one
shift and one mask, `(word >> b*j) & (2^b - 1) * 0x00010001`, and OR-ing 0x64006400 makes the two
16-bit halves the fp16 numbers 1024 + code (TurboMind's and AWQ's interleave, generalized).

Each chunk of 32 consecutive codes fills exactly b int32 words (32*b bits, nothing wasted) and is
cut into units of P codes (P = 32/b for b in {2, 4, 8}: one unit per word; P = 8 for b = 3: four
units). Code p of a unit sits at bit 16*(p % 2) + b*(p // 2) of the unit: even codes in the low
16-bit half, odd codes in the high half, so pair j of a unit is codes 2j and 2j+1, neighbours in K.
For b in {2, 4, 8} unit u is word u of the chunk. For b = 3, units 0..2 are words 0..2 (bits 0..11
and 16..27 of each); unit 3's twelve bits per half are stored in the words' free top nibbles: its
bit 16*h + 4*r + t (h < 2, r < 3, t < 4) sits at bit 16*h + 12 + t of word r.

Before layout version 2 (mpsim.engine.quantized.VERSION) codes were packed LSB first (code i of a
chunk at bit b*i of the chunk's word run); quantized folders written then are rejected by name.
"""

from __future__ import annotations

import numpy as np

PACKED_BITS = (2, 3, 4, 8)


def check_bits(bits: int) -> None:
    if bits not in PACKED_BITS:
        raise ValueError(f"bits={bits!r} is not a packed weight width; expected one of {PACKED_BITS}")


def unit_codes(bits: int) -> int:
    """P: codes per unit (a word for b in {2, 4, 8}; a 24-bit unit for b = 3)."""
    return 8 if bits == 3 else 32 // bits


def code_bit_positions(bits: int) -> np.ndarray:
    """(32, bits) int: the bit of the chunk's 32*b-bit word run (word w's bit t is 32*w + t) that
    holds bit t of code i. The one statement of the layout that pack/unpack follow."""
    check_bits(bits)
    per = unit_codes(bits)
    pos = np.empty((32, bits), dtype=np.int64)
    for i in range(32):
        unit, p = divmod(i, per)
        for t in range(bits):
            bit = 16 * (p % 2) + bits * (p // 2) + t  # bit of the unit
            if bits == 3 and unit == 3:  # the fourth 3-bit unit lives in the top nibbles
                half, rest = divmod(bit, 16)
                word, nib = divmod(rest, 4)
                pos[i, t] = 32 * word + 16 * half + 12 + nib
            else:
                pos[i, t] = 32 * unit + bit
    return pos


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes (N, Kp), Kp a multiple of 32, each < 2^bits -> int32 words (N, Kp*bits/32)."""
    check_bits(bits)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] % 32:
        raise ValueError(f"codes: expected shape (N, Kp) with Kp a multiple of 32, got {codes.shape}")
    if codes.size and int(codes.max()) >= (1 << bits):
        raise ValueError(f"codes: found {int(codes.max())}, which does not fit in {bits} bits")
    n, kp = codes.shape
    chunks = codes.reshape(n, kp // 32, 32).astype(np.uint32)
    words = np.zeros((n, kp // 32, bits), dtype=np.uint32)
    for i, row in enumerate(code_bit_positions(bits)):
        for t, p in enumerate(row):
            words[:, :, p // 32] |= ((chunks[:, :, i] >> np.uint32(t)) & np.uint32(1)) << np.uint32(p % 32)
    return words.view(np.int32).reshape(n, kp // 32 * bits)


def unpack_codes(qweight: np.ndarray, bits: int, k: int) -> np.ndarray:
    """int32 words (N, Kp*bits/32) -> uint8 codes (N, k), dropping the padding past k."""
    check_bits(bits)
    qweight = np.asarray(qweight)
    if qweight.dtype != np.int32 or qweight.ndim != 2 or qweight.shape[1] % bits:
        raise ValueError(f"qweight: expected int32 (N, Kp*{bits}/32), got {qweight.dtype} {qweight.shape}")
    n, nwords = qweight.shape
    kp = nwords // bits * 32
    if not 0 <= k <= kp:
        raise ValueError(f"k={k} is outside 0..{kp} (the packed length of qweight)")
    words = qweight.view(np.uint32).reshape(n, kp // 32, bits)
    chunks = np.zeros((n, kp // 32, 32), dtype=np.uint32)
    for i, row in enumerate(code_bit_positions(bits)):
        for t, p in enumerate(row):
            chunks[:, :, i] |= ((words[:, :, p // 32] >> np.uint32(p % 32)) & np.uint32(1)) << np.uint32(t)
    return chunks.astype(np.uint8).reshape(n, kp)[:, :k]
