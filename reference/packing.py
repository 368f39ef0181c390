"""Packing b-bit codes (b in 2, 3, 4, 8) into int32 words along K, as docs/formats.md pins it.

One rule covers every width: each chunk of 32 consecutive codes fills exactly b int32 words (32*b
bits, nothing wasted), and code i of a chunk sits at bit offset b*i of the chunk's little-endian word
run (LSB first). For b in {2, 4, 8} that is "weight k in word k // (32/b) at bit (k % (32/b))*b"; for
b = 3 codes 10 and 21 straddle two words.
"""

from __future__ import annotations

import numpy as np

PACKED_BITS = (2, 3, 4, 8)


def check_bits(bits: int) -> None:
    if bits not in PACKED_BITS:
        raise ValueError(f"bits={bits!r} is not a packed weight width; expected one of {PACKED_BITS}")


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes (N, Kp), Kp a multiple of 32, each < 2^bits -> int32 words (N, Kp*bits/32)."""
    check_bits(bits)
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] % 32:
        raise ValueError(f"codes: expected shape (N, Kp) with Kp a multiple of 32, got {codes.shape}")
    if codes.size and int(codes.max()) >= (1 << bits):
        raise ValueError(f"codes: found {int(codes.max())}, which does not fit in {bits} bits")
    n, kp = codes.shape
    chunks = codes.reshape(n, kp // 32, 32).astype(np.uint64)
    words = np.zeros((n, kp // 32, bits), dtype=np.uint64)
    for i in range(32):
        word, shift = divmod(bits * i, 32)
        words[:, :, word] |= (chunks[:, :, i] << np.uint64(shift)) & np.uint64(0xFFFFFFFF)
        if shift + bits > 32:  # straddles into the next word (3-bit codes 10 and 21)
            words[:, :, word + 1] |= chunks[:, :, i] >> np.uint64(32 - shift)
    return words.astype(np.uint32).view(np.int32).reshape(n, kp // 32 * bits)


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
    words = qweight.view(np.uint32).reshape(n, kp // 32, bits).astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    chunks = np.empty((n, kp // 32, 32), dtype=np.uint8)
    for i in range(32):
        word, shift = divmod(bits * i, 32)
        v = words[:, :, word] >> np.uint64(shift)
        if shift + bits > 32:
            v |= words[:, :, word + 1] << np.uint64(32 - shift)
        chunks[:, :, i] = (v & mask).astype(np.uint8)
    return chunks.reshape(n, kp)[:, :k]
