"""FP4 e2m1 values, their nibble packing, and the e8m0 power-of-two scale of MX, as docs/formats.md pins.

e2m1 (OCP Microscaling Formats v1.0): sign | 2-bit exponent (bias 1) | 1-bit mantissa,
16 codes, values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no inf, no NaN. Encoding rounds to nearest even and
always saturates (PTX ``cvt.rn.satfinite.e2m1x2.f32``): |x| > 6 gives +-6; NaN input is an error.

Packing: two codes per byte, element 2i in the low nibble and 2i+1 in the high nibble (what vLLM's
NVFP4 reference ``break_fp4_bytes`` unpacks, and PTX ``cvt...e2m1x2.f32 d, a, b`` produces with
a = x[2i+1], b = x[2i]: b goes to the low bits).

e8m0 (OCP MX v1.0): an unsigned 8-bit exponent, value 2^(c - 127) for c in 0..254
(2^-127 .. 2^127), c = 255 is NaN. The MX scale of a block (the spec's conversion): X = 2^(floor(log2(amax))
- emax_elem), emax_elem = 2 for e2m1, clamped to 2^-127 .. 2^127; an all-zero block gets 2^-127.
"""

from __future__ import annotations

import numpy as np

from mpsim.reference.minifloat import E2M1, decode, encode

__all__ = [
    "E2M1",
    "E2M1_EMAX",
    "E2M1_MAX",
    "decode_e2m1",
    "decode_e8m0",
    "encode_e2m1",
    "mx_scale_code",
    "pack_fp4",
    "unpack_fp4",
]

E2M1_MAX = 6.0
E2M1_EMAX = 2  # floor(log2(6)): the exponent of the largest e2m1 normal
E8M0_BIAS = 127
E8M0_NAN = 0xFF


def encode_e2m1(x: np.ndarray) -> np.ndarray:
    """fp32/fp16 -> uint8 e2m1 codes (0..15), RNE, saturating to +-6."""
    return encode(x, E2M1, saturate=True)


def decode_e2m1(codes: np.ndarray) -> np.ndarray:
    """uint8 e2m1 codes (0..15) -> float32 (exact)."""
    return decode(codes, E2M1)


def pack_fp4(codes: np.ndarray) -> np.ndarray:
    """uint8 codes [..., K] (each < 16, K even) -> bytes [..., K/2]: element 2i low nibble, 2i+1 high."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8 or codes.ndim < 1 or codes.shape[-1] % 2:
        raise ValueError(f"fp4 codes: expected uint8 [..., K] with K even, got {codes.dtype} {codes.shape}")
    if codes.size and int(codes.max()) > 15:
        raise ValueError(f"fp4 codes: found {int(codes.max())}, which does not fit in 4 bits")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """bytes [..., K/2] -> uint8 codes [..., K]."""
    packed = np.asarray(packed)
    if packed.dtype != np.uint8 or packed.ndim < 1:
        raise ValueError(f"fp4 bytes: expected uint8 [..., K/2], got {packed.dtype} {packed.shape}")
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def decode_e8m0(codes: np.ndarray) -> np.ndarray:
    """uint8 e8m0 codes -> float32 2^(c - 127) (2^-127 is an fp32 subnormal, exact); 0xFF -> NaN."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"e8m0 codes: expected uint8, got {codes.dtype}")
    with np.errstate(over="ignore"):
        v = np.ldexp(np.float32(1), codes.astype(np.int32) - E8M0_BIAS).astype(np.float32)
    return np.where(codes == E8M0_NAN, np.float32(np.nan), v)


def mx_scale_code(amax: np.ndarray, emax_elem: int = E2M1_EMAX) -> np.ndarray:
    """Block amax (float32, finite, >= 0) -> e8m0 code of X = 2^(floor(log2(amax)) - emax_elem)."""
    a = np.asarray(amax, dtype=np.float32).astype(np.float64)
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError("block amax: expected finite values >= 0")
    _, e = np.frexp(a)  # floor(log2 a) = e - 1 for a > 0 (exact, subnormals included)
    shared = np.where(a > 0, e.astype(np.int64) - 1 - emax_elem, -E8M0_BIAS)
    return (np.clip(shared, -E8M0_BIAS, E8M0_BIAS) + E8M0_BIAS).astype(np.uint8)
