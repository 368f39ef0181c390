"""FP8 e4m3 (OCP / NVIDIA ``e4m3fn``) and e5m2: encode from fp32 or fp16, decode, as docs/formats.md pins.

e4m3fn: bias 7, no infinities, max +-448 (S.1111.110), NaN only S.1111.111, smallest subnormal 2^-9.
e5m2: bias 15, IEEE-like: +-inf (S.11111.00), NaN (S.11111.xx, xx != 0), max +-57344, smallest
subnormal 2^-16. Both round to nearest even with gradual underflow (reference/minifloat.py).

Saturation is a parameter, never implicit:

- ``saturate=True`` (the default) is the hardware conversion ``cvt.rn.satfinite.{e4m3x2,e5m2x2}``
  that the fp8 kernels use: a finite value beyond the range and +-inf give +-max; NaN stays NaN.
- ``saturate=False`` is the OCP non-saturating mode: e4m3 overflow gives NaN (S.1111.111, for
  |x| > 464, the midpoint 464 rounding to even 448), e5m2 overflow gives +-inf (|x| >= 61440).

torch's casts (measured with torch 2.13.0+cpu, docs/formats.md#fp8): ``.to(torch.float8_e4m3fn)``
saturates (finite overflow and +-inf give +-448), i.e. it matches ``saturate=True``;
``.to(torch.float8_e5m2)`` does not (overflow gives +-inf), i.e. it matches ``saturate=False``.
"""

from __future__ import annotations

import numpy as np

from mpsim.reference.minifloat import E4M3, E5M2, decode, encode

__all__ = ["E4M3", "E4M3_MAX", "E5M2", "E5M2_MAX", "decode_e4m3", "decode_e5m2", "encode_e4m3", "encode_e5m2"]

E4M3_MAX = 448.0
E5M2_MAX = 57344.0


def encode_e4m3(x: np.ndarray, saturate: bool = True) -> np.ndarray:
    """fp32/fp16 -> uint8 e4m3fn codes, RNE; saturate=True clamps overflow to +-448 (satfinite)."""
    return encode(x, E4M3, saturate)


def encode_e5m2(x: np.ndarray, saturate: bool = True) -> np.ndarray:
    """fp32/fp16 -> uint8 e5m2 codes, RNE; saturate=True clamps overflow and inf to +-57344."""
    return encode(x, E5M2, saturate)


def decode_e4m3(codes: np.ndarray) -> np.ndarray:
    """uint8 e4m3fn codes -> float32 (exact)."""
    return decode(codes, E4M3)


def decode_e5m2(codes: np.ndarray) -> np.ndarray:
    """uint8 e5m2 codes -> float32 (exact)."""
    return decode(codes, E5M2)
