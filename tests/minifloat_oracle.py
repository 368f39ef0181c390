"""An independent, table-driven oracle for the small float formats (fp8 e4m3fn / e5m2, fp4 e2m1).

Built from the formats' definitions only (not from mpsim.reference): enumerate every finite positive
value with its code, then encode |x| as the nearest value, ties to the even code. Overflow follows
the definition of round-to-nearest on an unbounded exponent range: the value one step past the
largest finite one (480 for e4m3, 65536 for e5m2, 8 for e2m1) joins the table as a sentinel, and
rounding to it (or lying beyond it) is an overflow: +-max when saturating, else inf / NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Spec:
    ebits: int
    mbits: int
    bias: int
    kind: str  # "ieee" (e5m2), "fn" (e4m3fn: only S.1..1.1..1 is NaN), "finite" (e2m1)


E4M3_SPEC = Spec(4, 3, 7, "fn")
E5M2_SPEC = Spec(5, 2, 15, "ieee")
E2M1_SPEC = Spec(2, 1, 1, "finite")


def finite_values(spec: Spec) -> tuple[np.ndarray, np.ndarray]:
    """(values float64 ascending, positive codes) of every finite non-negative value."""
    vals, codes = [], []
    for e in range(1 << spec.ebits):
        for m in range(1 << spec.mbits):
            if spec.kind == "ieee" and e == (1 << spec.ebits) - 1:
                continue
            if spec.kind == "fn" and e == (1 << spec.ebits) - 1 and m == (1 << spec.mbits) - 1:
                continue
            sig = m if e == 0 else (1 << spec.mbits) + m
            vals.append(sig * 2.0 ** (max(e, 1) - spec.bias - spec.mbits))
            codes.append((e << spec.mbits) | m)
    order = np.argsort(vals)
    return np.array(vals)[order], np.array(codes)[order]


def oracle_encode(x: np.ndarray, spec: Spec, saturate: bool) -> np.ndarray:
    """fp32 values -> uint8 codes, nearest finite value with ties to the even code."""
    vals, codes = finite_values(spec)
    sign_bit = 1 << (spec.ebits + spec.mbits)
    ulp_top = vals[-1] - vals[-2]
    ext_vals = np.append(vals, vals[-1] + ulp_top)  # the sentinel (one step past the max)
    ext_codes = np.append(codes, codes[-1] + 1)
    x32 = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        a = np.abs(x32.astype(np.float64))
    a_fin = np.where(np.isfinite(a), a, 0.0)
    idx = np.clip(np.searchsorted(ext_vals, a_fin), 1, len(ext_vals) - 1)
    lo, hi = ext_vals[idx - 1], ext_vals[idx]
    d_lo, d_hi = a_fin - lo, hi - a_fin  # exact in float64 for these magnitudes
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (ext_codes[idx] % 2 == 0))
    pick = np.where(take_hi, idx, idx - 1)
    mag = ext_codes[pick]
    over = (pick == len(ext_vals) - 1) | (a_fin > ext_vals[-1]) | np.isinf(a)
    # non-saturating overflow: inf (exponent all ones, mantissa 0) or e4m3fn's NaN; e2m1 only saturates
    over_code = ((1 << spec.ebits) - 1) << spec.mbits if spec.kind == "ieee" else sign_bit - 1
    mag = np.where(over, codes[-1] if saturate else over_code, mag)
    mag = np.where(np.isnan(a), sign_bit - 1, mag)
    sign = np.where(np.signbit(x32), sign_bit, 0)
    return (mag | sign).astype(np.uint8)


def fp32_samples(spec: Spec, n: int, seed: int) -> np.ndarray:
    """n fp32 values: a quarter random bit patterns (NaN, inf, huge, tiny), a quarter in the format's
    range with random significands, a quarter exact midpoints between neighbours (ties) and their fp32
    neighbours, a quarter near zero, the subnormals and the overflow threshold."""
    rng = np.random.default_rng(seed)
    q = n // 4
    bits = rng.integers(0, 2**32, q, dtype=np.uint64).astype(np.uint32).view(np.float32)
    vals, _ = finite_values(spec)
    lo_exp, hi_exp = int(np.log2(vals[1])) - 3, int(np.log2(vals[-1])) + 3
    in_range = np.ldexp(rng.uniform(1, 2, q), rng.integers(lo_exp, hi_exp, q)).astype(np.float32)
    ext = np.append(vals, 2 * vals[-1] - vals[-2])
    i = rng.integers(0, len(ext) - 1, q)
    mid = ((ext[i] + ext[i + 1]) / 2).astype(np.float32)  # exact: a few bits
    step = rng.integers(-1, 2, q)
    toward = np.where(step < 0, np.float32(-np.inf), np.float32(np.inf)).astype(np.float32)
    ties = np.where(step == 0, mid, np.nextafter(mid, toward)).astype(np.float32)
    edges = np.concatenate([[0.0, vals[1] / 2, vals[1], vals[-1], ext[-1]], ext])
    near = (rng.choice(edges, n - 3 * q) * rng.uniform(0.97, 1.03, n - 3 * q)).astype(np.float32)
    x = np.concatenate([bits, in_range, ties, near]).astype(np.float32)
    signs = rng.integers(0, 2, x.size).astype(bool)
    return np.where(signs, -x, x).astype(np.float32)
