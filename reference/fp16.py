"""The fp16 boundary of the numba references: widening, checks, and fp32 -> fp16 rounding inside numba.

numba cannot type float16 arrays, so every public wrapper widens fp16 inputs to fp32 (exact) and rounds
results back with numpy's ``astype(np.float16)`` (round to nearest even). Where a reference needs an
fp16-rounded value *inside* a numba loop (a dequantized weight or KV element that the kernels hold in
fp16 before the dot product), ``round_fp16_inplace`` gives bit-identical results to numpy's conversion:
round to nearest even on the 11-bit significand, gradual underflow to the fp16 subnormals (quantum
2^-24), overflow past 65504 (ties at 65520 included) to infinity.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# fp32 bit patterns of the thresholds used by the rounding below.
_F32_MIN_FP16_NORMAL_BITS = 0x38800000  # 2^-14, the smallest fp16 normal
_F32_FP16_MAX_BITS = 0x477FE000  # 65504.0
_F32_INF_BITS = 0x7F800000


@njit(cache=True)
def round_fp16_inplace(a: np.ndarray) -> None:
    """Round every element of a 1-D float32 array to the nearest fp16 value (ties to even), in place.

    Normal fp16 range: add half of the 13 dropped significand bits (plus the kept LSB, for ties to
    even) to the fp32 bit pattern and clear them; a carry moves into the exponent, as it should.
    Subnormal range (|x| < 2^-14): round x * 2^24 to the nearest integer (exact scalings).
    """
    u = a.view(np.uint32)
    for i in range(a.size):
        bits = u[i]
        mag = bits & np.uint32(0x7FFFFFFF)
        if mag >= np.uint32(_F32_INF_BITS):
            continue  # inf and nan stay as they are
        if mag >= np.uint32(_F32_MIN_FP16_NORMAL_BITS):
            lsb = (mag >> np.uint32(13)) & np.uint32(1)
            mag = (mag + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
            if mag > np.uint32(_F32_FP16_MAX_BITS):
                mag = np.uint32(_F32_INF_BITS)
            u[i] = (bits & np.uint32(0x80000000)) | mag
        else:
            a[i] = np.float32(np.rint(np.float64(a[i]) * 16777216.0) / 16777216.0)


@njit(cache=True)
def round_fp16(v: float) -> np.float32:
    """One fp32 value rounded to the nearest fp16 value (ties to even) as fp32; overflow past 65504
    (ties at 65520 included) gives infinity. The same rule as round_fp16_inplace, for scalars: the
    fp16 quantum of |v| (2^(e-11) for |v| in [2^(e-1), 2^e), at least 2^-24) times an rne integer."""
    a = np.float64(v)
    if not np.isfinite(a) or a == 0.0:
        return np.float32(a)
    _, e = math.frexp(a)
    quantum = math.ldexp(1.0, max(e - 11, -24))
    r = np.rint(a / quantum) * quantum
    if abs(r) > 65504.0:
        r = math.copysign(math.inf, a)
    return np.float32(r)


def widen(x: np.ndarray, name: str, ndim: int | None = None) -> np.ndarray:
    """fp16 (or fp32) array -> C-contiguous float32 copy, exact. Other dtypes are an error."""
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32):
        raise ValueError(f"{name}: expected a float16 (or float32) array, got dtype {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {x.shape}")
    return np.ascontiguousarray(x, dtype=np.float32)


def widen_bias(bias: np.ndarray | None, n: int) -> tuple[np.ndarray, bool]:
    """Optional (N,) bias -> (float32 array of length N, whether a bias was given)."""
    if bias is None:
        return np.zeros(n, dtype=np.float32), False
    b = widen(bias, "bias", 1)
    if b.shape[0] != n:
        raise ValueError(f"bias: expected length {n} (the output features), got {b.shape[0]}")
    return b, True


def to_fp16(a: np.ndarray) -> np.ndarray:
    """float32/float64 -> float16, round to nearest even (numpy's conversion; the kernels' .to(fp16))."""
    return np.asarray(a).astype(np.float16)
