"""KV-cache int8/int4 format: the contract's arithmetic, saturation, nibble order, round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mpsim.reference.kv_quant import kv_dequant_ref, kv_quant_ref, unpack_int4
from mpsim.reference.tolerance import FP16_HALF_SUBNORMAL, U16, U32, gamma

SETTINGS = settings(max_examples=40, deadline=None)


def _rows(limit: float) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(
        np.float16,
        st.tuples(st.integers(1, 3), st.sampled_from((2, 8, 64, 128))),
        elements=st.floats(-limit, limit, width=16, allow_nan=False, allow_infinity=False),
    )


FP16_ROWS = _rows(60000)


def _scalar_quant(row: np.ndarray, bits: int) -> tuple[list[int], np.float16, np.float16]:
    """The contract, one fp32 scalar operation at a time (an independent implementation)."""
    f32 = np.float32
    mn = f32(min(row.astype(np.float32))) + f32(0)  # +-0 extremes count as +0 (docs/formats.md)
    mx = f32(max(row.astype(np.float32))) + f32(0)
    scale = np.float16(f32(mx - mn) / f32((1 << bits) - 1))
    zero = np.float16(mn)
    codes = []
    for x in row:
        if scale == 0:
            codes.append(0)
            continue
        v = f32(f32(x) - f32(zero)) / f32(scale)
        r = f32(f32(v + f32(12582912.0)) - f32(12582912.0))
        codes.append(int(min(max(r, 0), (1 << bits) - 1)))
    return codes, scale, zero


@SETTINGS
@given(x=FP16_ROWS, bits=st.sampled_from((8, 4)))
@example(x=np.array([[-0.0, -0.0], [0.0, -0.0]], dtype=np.float16), bits=8)  # +-0 extremes
def test_matches_scalar_contract(x: np.ndarray, bits: int) -> None:
    codes, scale, zero = kv_quant_ref(x, bits)
    flat = unpack_int4(codes) if bits == 4 else codes
    for r in range(x.shape[0]):
        c, s, z = _scalar_quant(x[r], bits)
        assert flat[r].tolist() == c
        assert scale[r].view(np.uint16) == s.view(np.uint16)
        assert zero[r].view(np.uint16) == z.view(np.uint16)


@SETTINGS
@given(x=FP16_ROWS, bits=st.sampled_from((8, 4)))
def test_codes_are_monotone_in_x_so_nothing_wraps(x: np.ndarray, bits: int) -> None:
    codes, _, _ = kv_quant_ref(x, bits)
    flat = unpack_int4(codes) if bits == 4 else codes
    for r in range(x.shape[0]):
        order = np.argsort(x[r].astype(np.float32), kind="stable")
        assert (np.diff(flat[r][order].astype(int)) >= 0).all()
        assert flat[r].max() < (1 << bits)


@pytest.mark.parametrize("bits", (8, 4))
def test_subnormal_scale_saturates(bits: int) -> None:
    qmax = (1 << bits) - 1
    # range 1.4 * qmax * 2^-24: the fp16 scale rounds down to 2^-24, so the top values overflow qmax
    top = np.float16(np.ldexp(round(1.4 * qmax), -24))
    x = np.array([[0.0, top, top / 2, 0.0]], dtype=np.float16)
    codes, scale, _ = kv_quant_ref(x, bits)
    flat = unpack_int4(codes) if bits == 4 else codes
    assert scale[0] == np.float16(2.0**-24)
    assert flat[0, 1] == qmax  # saturated, not wrapped modulo 2^b
    assert flat[0, 2] == min(round(int(top.astype(np.float64) * 2**24) / 2), qmax)


@SETTINGS
@given(x=_rows(15000), bits=st.sampled_from((8, 4)))
def test_dequant_within_half_a_step(x: np.ndarray, bits: int) -> None:
    codes, scale, zero = kv_quant_ref(x, bits)
    xh = kv_dequant_ref(codes, scale, zero, bits, x.shape[1]).astype(np.float64)
    x64 = x.astype(np.float64)
    s = scale.astype(np.float64)[:, None]
    flat = unpack_int4(codes) if bits == 4 else codes
    # (x - zero) / scale in fp32: 2 roundings; rne: half a step; q*s + zero: 1 rounding; fp16 out
    step = 0.5 * s + gamma(2) * np.abs(x64 - zero.astype(np.float64)[:, None])
    bound = step + (U32 + U16) * (np.abs(x64) + step) + FP16_HALF_SUBNORMAL
    err = np.abs(xh - x64)
    unclamped = (flat < (1 << bits) - 1) & (s > 0)
    assert (err[unclamped] <= bound[unclamped]).all()
    # a zero scale (range under ~qmax * 2^-25) sends the row to its minimum
    flat_rows = s[:, 0] == 0
    assert (err[flat_rows] <= np.ptp(x64[flat_rows], axis=1, keepdims=True)).all()


@SETTINGS
@given(
    bits=st.sampled_from((8, 4)),
    rows=st.integers(1, 4),
    d=st.sampled_from((2, 16, 128)),
    seed=st.integers(0, 2**31),
)
def test_representable_values_round_trip_exactly(bits: int, rows: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    qmax = (1 << bits) - 1
    q = rng.integers(0, qmax + 1, (rows, d))
    q[:, 0], q[:, -1] = 0, qmax
    e = rng.integers(-12, 0, (rows, 1))
    zero = rng.integers(-64, 64, (rows, 1)) * np.ldexp(1.0, e)  # a multiple of the step
    x = (q * np.ldexp(1.0, e) + zero).astype(np.float16)
    assert np.array_equal(x.astype(np.float64), q * np.ldexp(1.0, e) + zero)
    codes, scale, z = kv_quant_ref(x, bits)
    np.testing.assert_array_equal(unpack_int4(codes) if bits == 4 else codes, q)
    np.testing.assert_array_equal(kv_dequant_ref(codes, scale, z, bits, d), x)


def test_int4_nibble_order_and_shapes() -> None:
    x = np.array([[[0.0, 15.0, 1.0, 14.0]]], dtype=np.float16)  # scale 1, zero 0
    codes, scale, zero = kv_quant_ref(x, 4)
    assert codes.shape == (1, 1, 2) and scale.shape == (1, 1) and zero.shape == (1, 1)
    assert codes[0, 0].tolist() == [0xF0, 0xE1]  # element 2i low nibble, 2i+1 high nibble


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="bits=16"):
        kv_quant_ref(np.zeros((2, 4), np.float16), 16)
    with pytest.raises(ValueError, match="even head_dim"):
        kv_quant_ref(np.zeros((2, 5), np.float16), 4)
    with pytest.raises(ValueError, match="float16"):
        kv_quant_ref(np.zeros((2, 4), np.float32), 8)
