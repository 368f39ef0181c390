"""Small floating-point formats (fp8 e4m3 / e5m2, fp4 e2m1): definition, decode table, RNE encoder.

A format is sign | ebits exponent | mbits mantissa with exponent bias `bias` (docs/formats.md#fp8):
exponent field 0 is subnormal (value M * 2^(emin - mbits), emin = 1 - bias), otherwise
(1 + M / 2^mbits) * 2^(E - bias). Special codes, by family:

- IEEE-like (`ieee_specials`, e5m2): exponent all ones is inf (M = 0) or NaN (M != 0).
- finite-with-NaN (e4m3fn): no infinities; only S.1111.111 is NaN, so 0x7E = 448 is finite.
- finite-only (e2m1): every code is a number.

Encoding (fp32, or fp16 widened exactly) rounds to nearest, ties to even, with gradual underflow to
the subnormals; the sign of the input is kept (a negative value that rounds to zero gives -0). With
ex = max(floor(log2 |x|), emin) and n = rne(|x| / 2^(ex - mbits)) (an integer, exact in float64),
the magnitude code is ((ex - emin) << mbits) + n: a carry of n into 2^(mbits+1) lands on the next
exponent with mantissa 0, and n < 2^mbits at ex = emin is a subnormal. A magnitude code above the
largest finite one is an overflow:

- saturate=True (PTX ``cvt.rn.satfinite``): overflow and +-inf give +-max (448, 57344, 6).
- saturate=False (IEEE-like / OCP non-saturating): overflow and +-inf give +-inf (e5m2) or the NaN
  code S.1111.111 (e4m3fn); finite-only formats have no such mode.

NaN inputs give the format's NaN with the input's sign, all mantissa bits set (S.1111.111 for
e4m3fn, S.11111.11 for e5m2): the canonical NaN; a finite-only format rejects NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class MiniFloat:
    """One small float format. `ieee_specials`: inf/NaN at the top exponent; `has_nan`: some NaN code."""

    name: str
    ebits: int
    mbits: int
    bias: int
    ieee_specials: bool
    has_nan: bool

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max_code(self) -> int:
        """The positive code of the largest finite value."""
        top = (1 << (self.ebits + self.mbits)) - 1  # S.111..1.111..1 without the sign
        if self.ieee_specials:
            return top - (1 << self.mbits)  # exponent all ones is inf/NaN: the one below, mantissa full
        return top - 1 if self.has_nan else top

    @property
    def nan_code(self) -> int:
        """The positive canonical NaN (all exponent and mantissa bits set); -1 when there is none."""
        return (1 << (self.ebits + self.mbits)) - 1 if self.has_nan else -1

    @property
    def overflow_code(self) -> int:
        """What a non-saturating overflow gives (before the sign): inf, or NaN where there is no inf."""
        if self.ieee_specials:
            return self.max_code + 1  # exponent all ones, mantissa 0
        if self.has_nan:
            return self.nan_code
        raise ValueError(f"{self.name} has neither inf nor NaN: it can only saturate")

    @property
    def max_value(self) -> float:
        return decode_value(self, self.max_code)


E4M3 = MiniFloat("e4m3fn", ebits=4, mbits=3, bias=7, ieee_specials=False, has_nan=True)
E5M2 = MiniFloat("e5m2", ebits=5, mbits=2, bias=15, ieee_specials=True, has_nan=True)
E2M1 = MiniFloat("e2m1", ebits=2, mbits=1, bias=1, ieee_specials=False, has_nan=False)


def decode_value(fmt: MiniFloat, code: int) -> float:
    """The value of one code, from the definition (a Python float; NaN and inf where they are)."""
    mag = code & (fmt.sign_bit - 1)
    sign = -1.0 if code & fmt.sign_bit else 1.0
    e_field, m_field = mag >> fmt.mbits, mag & ((1 << fmt.mbits) - 1)
    if fmt.ieee_specials and e_field == (1 << fmt.ebits) - 1:
        return sign * float("inf") if m_field == 0 else float("nan") * sign
    if fmt.has_nan and mag == fmt.nan_code:
        return float("nan") * sign
    if e_field == 0:
        return sign * m_field * 2.0 ** (fmt.emin - fmt.mbits)
    return sign * (1 + m_field / (1 << fmt.mbits)) * 2.0 ** (e_field - fmt.bias)


@cache
def value_table(fmt: MiniFloat) -> np.ndarray:
    """float32 array of the 2^bits code values (read-only); NaN codes hold a NaN with the code's sign."""
    n = fmt.sign_bit << 1
    table = np.empty(n, dtype=np.float32)
    for code in range(n):
        v = decode_value(fmt, code)
        table[code] = np.copysign(np.float32(v), -1.0 if code & fmt.sign_bit else 1.0)
    table.setflags(write=False)
    return table


def decode(codes: np.ndarray, fmt: MiniFloat) -> np.ndarray:
    """uint8 codes -> float32 values (exact: every code value is an fp32 value)."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"{fmt.name} codes: expected uint8, got {codes.dtype}")
    if codes.size and int(codes.max()) >= fmt.sign_bit << 1:
        width = 1 + fmt.ebits + fmt.mbits
        raise ValueError(f"{fmt.name} codes: found {int(codes.max())}, which does not fit in {width} bits")
    return value_table(fmt)[codes]


def as_float32(x: np.ndarray, name: str) -> np.ndarray:
    """fp16 or fp32 array -> float32 (the fp16 widening is exact, so encoding an fp16 value directly
    (PTX cvt.rn.satfinite.e4m3x2.f16x2) and through fp32 give the same code)."""
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32):
        raise ValueError(f"{name}: expected a float16 or float32 array, got dtype {x.dtype}")
    return x.astype(np.float32)


def encode(x: np.ndarray, fmt: MiniFloat, saturate: bool = True) -> np.ndarray:
    """fp32/fp16 values -> uint8 codes of `fmt`, round to nearest even, saturating or not (module doc)."""
    x32 = as_float32(x, f"{fmt.name} input")
    if not saturate:
        _ = fmt.overflow_code  # raises for finite-only formats
    nan = np.isnan(x32)
    if nan.any() and not fmt.has_nan:
        raise ValueError(f"{fmt.name} has no NaN: the input holds NaN")
    sign = np.where(np.signbit(x32), fmt.sign_bit, 0).astype(np.int64)
    with np.errstate(invalid="ignore"):  # a signalling NaN widens quietly
        a = np.abs(x32.astype(np.float64))
    inf = np.isinf(a)
    a = np.where(nan | inf, 0.0, a)
    _, e = np.frexp(a)  # a = f * 2^e with f in [0.5, 1): floor(log2 a) = e - 1 (a > 0)
    ex = np.where(a > 0, np.maximum(e.astype(np.int64) - 1, fmt.emin), fmt.emin)  # frexp(0) gives e = 0
    n = np.rint(np.ldexp(a, (fmt.mbits - ex).astype(np.int32)))  # exact scaling; rint ties to even
    mag = ((ex - fmt.emin) << fmt.mbits) + n.astype(np.int64)
    over = (mag > fmt.max_code) | inf
    mag = np.where(over, fmt.max_code if saturate else fmt.overflow_code, mag)
    mag = np.where(nan, fmt.nan_code, mag)
    return (mag | sign).astype(np.uint8)
