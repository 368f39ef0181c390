"""The numba fp32 -> fp16 rounding and the tolerance helpers themselves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.fp16 import round_fp16_inplace, widen
from mpsim.reference.tolerance import U16, assert_close_bound, fp16_output_bound, gamma


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_rounding_matches_numpy_on_random_fp32_bit_patterns(seed: int) -> None:
    bits = np.random.default_rng(seed).integers(0, 2**32, 100_000, dtype=np.uint64)
    a = bits.astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        expect = a.astype(np.float16).astype(np.float32)
    got = a.copy()
    round_fp16_inplace(got)
    assert _same_bits(got, expect)


def test_rounding_matches_numpy_on_every_fp16_value_and_midpoint() -> None:
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    h = np.sort(h[np.isfinite(h)])
    mid = ((h[:-1].astype(np.float64) + h[1:]) / 2).astype(np.float32)  # exact ties
    for a in (h, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))):
        got = a.copy()
        round_fp16_inplace(got)
        with np.errstate(over="ignore"):
            assert _same_bits(got, a.astype(np.float16).astype(np.float32))


def test_overflow_threshold_is_65520() -> None:
    a = np.array([65519.996, 65520.0, -65520.0, 1e-8, 2.0**-25, 3 * 2.0**-26], np.float32)
    round_fp16_inplace(a)
    assert a[0] == 65504 and a[1] == np.inf and a[2] == -np.inf
    assert a[3] == 0 and a[4] == 0 and a[5] == 2.0**-24  # tie at 2^-25 goes to even (0)


def test_widen_rejects_other_dtypes() -> None:
    with pytest.raises(ValueError, match="float16"):
        widen(np.zeros(3, np.int32), "x")


def test_gamma_refuses_when_no_bound_exists() -> None:
    assert gamma(1) == pytest.approx(2.0**-24, rel=1e-6)
    with pytest.raises(ValueError, match="does not exist"):
        gamma(2**24)


def test_assert_close_bound_names_the_worst_element_and_fails_on_nan() -> None:
    expect = np.array([1.0, 2.0, 3.0])
    bound = fp16_output_bound(expect, np.zeros(3))
    assert_close_bound(expect.astype(np.float16), expect, bound, "exact")
    off_by_one_ulp = np.array([1.0, 2.0, 3.0 + 2 * 3 * U16], np.float16)
    with pytest.raises(AssertionError, match=r"worst at \(2,\)"):
        assert_close_bound(off_by_one_ulp, expect, bound, "ulp")
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close_bound(np.array([np.nan, 2, 3]), expect, bound, "nan")
