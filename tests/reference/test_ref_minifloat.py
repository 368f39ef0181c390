"""fp8 e4m3fn / e5m2 and fp4 e2m1 encoders: every code round-trips, encoding matches a table-driven
oracle (tests/minifloat_oracle.py) bit for bit on 1e6 fp32 values and on every fp16 value, saturation
and NaN as docs/formats.md#fp8 states, hypothesis on random fp32 bit patterns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from minifloat_oracle import E2M1_SPEC, E4M3_SPEC, E5M2_SPEC, Spec, finite_values, fp32_samples, oracle_encode

from mpsim.reference.fp4 import decode_e2m1, encode_e2m1
from mpsim.reference.fp8 import decode_e4m3, decode_e5m2, encode_e4m3, encode_e5m2
from mpsim.reference.minifloat import E2M1, E4M3, E5M2, MiniFloat, decode, encode

FORMATS = [(E4M3, E4M3_SPEC), (E5M2, E5M2_SPEC), (E2M1, E2M1_SPEC)]
MODES = [(f, s, sat) for f, s in FORMATS for sat in ((True, False) if s.kind != "finite" else (True,))]
IDS = [f"{f.name}-{'sat' if sat else 'nosat'}" for f, _, sat in MODES]
BITS32 = hnp.arrays(np.uint32, st.integers(1, 64), elements=st.integers(0, 2**32 - 1))


def _no_nan_for_finite(x: np.ndarray, spec: Spec) -> np.ndarray:
    return x[~np.isnan(x)] if spec.kind == "finite" else x


@pytest.mark.parametrize(("fmt", "spec", "sat"), MODES, ids=IDS)
def test_encode_matches_the_oracle_on_a_million_fp32_values(fmt: MiniFloat, spec: Spec, sat: bool) -> None:
    x = _no_nan_for_finite(fp32_samples(spec, 1_000_000, seed=26), spec)
    got, want = encode(x, fmt, sat), oracle_encode(x, spec, sat)
    bad = np.flatnonzero(got != want)
    first = bad[:4]
    assert bad.size == 0, f"{bad.size} mismatches, first x={x[first]} got={got[first]} want={want[first]}"


@pytest.mark.parametrize(("fmt", "spec", "sat"), MODES, ids=IDS)
def test_encode_from_fp16_matches_the_oracle_on_every_fp16_value(
    fmt: MiniFloat, spec: Spec, sat: bool
) -> None:
    h = _no_nan_for_finite(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16), spec)
    np.testing.assert_array_equal(encode(h, fmt, sat), oracle_encode(h.astype(np.float32), spec, sat))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(bits=BITS32)
def test_random_fp32_bit_patterns_match_the_oracle(bits: np.ndarray) -> None:
    x = bits.view(np.float32)
    for fmt, spec, sat in MODES:
        xs = _no_nan_for_finite(x, spec)
        np.testing.assert_array_equal(encode(xs, fmt, sat), oracle_encode(xs, spec, sat))


@pytest.mark.parametrize(("fmt", "spec"), FORMATS, ids=[f.name for f, _ in FORMATS])
def test_every_code_round_trips(fmt: MiniFloat, spec: Spec) -> None:
    codes = np.arange(2 * fmt.sign_bit, dtype=np.uint8)
    values = decode(codes, fmt)
    nan = np.isnan(values)
    inf = np.isinf(values)
    back = encode(values, fmt, saturate=True)
    np.testing.assert_array_equal(back[~nan & ~inf], codes[~nan & ~inf])  # -0 (0x80) included
    canonical = np.where(codes >= fmt.sign_bit, fmt.sign_bit | fmt.nan_code, fmt.nan_code)
    np.testing.assert_array_equal(back[nan], canonical[nan])  # NaN codes -> S.1...1, sign kept
    if fmt.ieee_specials:
        np.testing.assert_array_equal(encode(values[inf], fmt, saturate=False), codes[inf])
    # the decoded values are exactly the definition's values
    vals, pos = finite_values(spec)
    np.testing.assert_array_equal(values[pos].astype(np.float64), vals)


def test_format_constants_and_value_tables() -> None:
    assert decode_e4m3(np.array([0x7E, 0x01, 0x08, 0x80], np.uint8)).tolist()[:3] == [448.0, 2.0**-9, 2.0**-6]
    assert np.isnan(decode_e4m3(np.array([0x7F, 0xFF], np.uint8))).all()
    assert np.signbit(decode_e4m3(np.array([0x80], np.uint8)))[0]  # -0
    e5 = decode_e5m2(np.array([0x7B, 0x7C, 0xFC, 0x01, 0x7D], np.uint8))
    assert e5[:4].tolist() == [57344.0, np.inf, -np.inf, 2.0**-16] and np.isnan(e5[4])
    assert decode_e2m1(np.arange(8, dtype=np.uint8)).tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert decode_e2m1(np.arange(8, 16, dtype=np.uint8)).tolist() == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert (E4M3.max_value, E5M2.max_value, E2M1.max_value) == (448.0, 57344.0, 6.0)


def test_saturation_is_explicit() -> None:
    x = np.array([448, 463.99, 464, 464.01, 1e6, np.inf, -np.inf, -500], np.float32)
    assert encode_e4m3(x).tolist() == [0x7E] * 6 + [0xFE, 0xFE]  # satfinite: +-448
    assert encode_e4m3(x, saturate=False).tolist() == [0x7E, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0xFF, 0xFF]
    y = np.array([57344, 61439, 61440, 1e6, np.inf, -np.inf], np.float32)
    assert encode_e5m2(y).tolist() == [0x7B] * 5 + [0xFB]
    assert encode_e5m2(y, saturate=False).tolist() == [0x7B, 0x7B, 0x7C, 0x7C, 0x7C, 0xFC]
    assert encode_e2m1(np.array([5.0, 5.01, 7.0, 1e30, -np.inf], np.float32)).tolist() == [6, 7, 7, 7, 15]


def test_ties_to_even_and_subnormals() -> None:
    # e4m3: 2^-10 is half the smallest subnormal: ties to 0; 1.5 * 2^-9 ties to code 2 (even)
    x = np.array([2.0**-10, 3 * 2.0**-10, -(2.0**-11), 17.0, 18.0, 19.0], np.float32)
    assert encode_e4m3(x).tolist() == [0x00, 0x02, 0x80, 0x58, 0x59, 0x5A]  # 17 -> 16, 18, 19 -> 20
    e2 = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.1], np.float32)
    assert encode_e2m1(e2).tolist() == [0, 2, 2, 4, 4, 6, 6, 8]


def test_nan_handling() -> None:
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001], np.uint32).view(np.float32)  # +q, -q, signalling
    for sat in (True, False):
        assert encode_e4m3(nans, sat).tolist() == [0x7F, 0xFF, 0x7F]
        assert encode_e5m2(nans, sat).tolist() == [0x7F, 0xFF, 0x7F]
    with pytest.raises(ValueError, match="e2m1 has no NaN"):
        encode_e2m1(nans)
    with pytest.raises(ValueError, match="can only saturate"):
        encode(np.zeros(2, np.float32), E2M1, saturate=False)
    with pytest.raises(ValueError, match="float16 or float32"):
        encode_e4m3(np.zeros(2, np.float64))
    with pytest.raises(ValueError, match="does not fit in 4 bits"):
        decode_e2m1(np.array([16], np.uint8))
