"""The numba twins of the fp8 / fp4 formats and quantizers give the numpy references' bits exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from minifloat_oracle import E4M3_SPEC, E5M2_SPEC, Spec, fp32_samples

from mpsim.reference.fp4_quant import FP4_KINDS, quantize_fp4
from mpsim.reference.fp8_quant import GRANULARITIES, quantize_fp8, quantize_fp8_tokens
from mpsim.reference.minifloat import E2M1, E4M3, E5M2, MiniFloat, decode, encode
from mpsim.reference.minifloat_numba import (
    decode_numba,
    encode_numba,
    quantize_fp4_numba,
    quantize_fp8_numba,
    quantize_fp8_tokens_numba,
)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
FP16_MATRIX = hnp.arrays(
    np.float16,
    st.tuples(st.integers(1, 9), st.integers(1, 150)),
    elements=st.floats(-65504, 65504, width=16, allow_nan=False, allow_infinity=False),
)


@pytest.mark.parametrize("fmt", [E4M3, E5M2, E2M1], ids=lambda f: f.name)
def test_decode_twin_on_every_code(fmt: MiniFloat) -> None:
    codes = np.arange(2 * fmt.sign_bit, dtype=np.uint8)
    got, want = decode_numba(codes, fmt), decode(codes, fmt)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(("fmt", "spec"), [(E4M3, E4M3_SPEC), (E5M2, E5M2_SPEC)], ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("sat", [True, False])
def test_encode_twin_on_the_oracle_samples(fmt: MiniFloat, spec: Spec, sat: bool) -> None:
    x = fp32_samples(spec, 200_000, seed=7)
    np.testing.assert_array_equal(encode_numba(x, fmt, sat), encode(x, fmt, sat))
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    np.testing.assert_array_equal(encode_numba(h, fmt, sat), encode(h, fmt, sat))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(bits=hnp.arrays(np.uint32, st.integers(1, 64), elements=st.integers(0, 2**32 - 1)))
def test_encode_twin_on_random_bit_patterns(bits: np.ndarray) -> None:
    x = bits.view(np.float32)
    for fmt in (E4M3, E5M2):
        for sat in (True, False):
            np.testing.assert_array_equal(encode_numba(x, fmt, sat), encode(x, fmt, sat))
    finite = x[~np.isnan(x)]
    np.testing.assert_array_equal(encode_numba(finite, E2M1), encode(finite, E2M1))


@SETTINGS
@given(w=FP16_MATRIX, gran=st.sampled_from(GRANULARITIES))
def test_fp8_quantizer_twins(w: np.ndarray, gran: str) -> None:
    a, b = quantize_fp8(w, gran), quantize_fp8_numba(w, gran)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.scales.view(np.uint32), b.scales.view(np.uint32))
    assert a.tile == b.tile
    a, b = quantize_fp8_tokens(w), quantize_fp8_tokens_numba(w)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.scales.view(np.uint32), b.scales.view(np.uint32))


@SETTINGS
@given(w=FP16_MATRIX, kind=st.sampled_from(FP4_KINDS), shrink=st.integers(0, 20))
def test_fp4_quantizer_twins(w: np.ndarray, kind: str, shrink: int) -> None:
    w = (w.astype(np.float32) * np.float32(2.0**-shrink)).astype(np.float16)  # subnormal blocks too
    a, b = quantize_fp4(w, kind), quantize_fp4_numba(w, kind)
    np.testing.assert_array_equal(a.packed, b.packed)
    np.testing.assert_array_equal(a.scales, b.scales)
    assert a.global_scale.view(np.uint32) == b.global_scale.view(np.uint32)
    assert (a.kind, a.k) == (b.kind, b.k)


def test_twins_on_rounding_sensitive_cases() -> None:
    """Cases where a reordered division (x * fl(1/s), fl(amax / 6) / g) changes a code (found by search)."""
    w = np.array([[18.3125, 4688 * 2.0**-24]], np.float16)
    assert quantize_fp8_numba(w).codes.tolist() == quantize_fp8(w).codes.tolist() == [[0x7E, 4]]
    w4 = np.zeros((1, 64), np.float16)
    w4[0, 0], w4[0, 16] = 652.0, 500736 * 2.0**-24
    w4[0, 32] = 0.001  # a block scale floored at 2^-9; block 3 all zero (scale 1)
    a, b = quantize_fp4(w4, "nvfp4"), quantize_fp4_numba(w4, "nvfp4")
    assert b.scales.tolist() == a.scales.tolist() == [[0x7E, 11, 0x01, 0x38]]
    np.testing.assert_array_equal(a.packed, b.packed)
