"""The numba twin of the one-row group GEMV's fp16 partial sums (reference/gemv_group.py), its
scalar fp16 rounding, and gemv_partial_bound (reference/tolerance.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mpsim.reference.exact import gemm_float64
from mpsim.reference.fp16 import round_fp16
from mpsim.reference.gemv_group import gemv_group_partial_ref, partial_exp
from mpsim.reference.group_quant import GroupQuantWeight, dequantize_group, quantize_group
from mpsim.reference.packing import pack_codes
from mpsim.reference.tolerance import assert_close_bound, gemv_partial_bound


def _bound(gw: GroupQuantWeight, x: np.ndarray, trips: int, bias: np.ndarray | None = None) -> np.ndarray:
    s_k = np.repeat(gw.scales.astype(np.float64), gw.group_size, axis=1)[:, :gw.k]
    return gemv_partial_bound(x, dequantize_group(gw), s_k, gw.bits, trips, bias)


def test_scalar_rounding_matches_numpy_on_every_fp16_value_midpoint_and_neighbour() -> None:
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    h = np.sort(h[np.isfinite(h)])
    mid = ((h[:-1].astype(np.float64) + h[1:]) / 2).astype(np.float32)  # exact ties
    top = np.array([65504.0, 65519.996, 65520.0, 1e6], dtype=np.float32)
    for a in (h, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
              top, -top):
        got = np.array([round_fp16(v) for v in a], dtype=np.float32)
        with np.errstate(over="ignore"):
            want = a.astype(np.float16).astype(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(("bits", "group", "lanes", "trips"), [
    (4, 128, 32, 4), (3, 128, 32, 4), (2, 64, 32, 2), (4, 256, 32, 4), (2, 128, 16, 4)])
@pytest.mark.parametrize("k", (100, 512))
def test_twin_within_the_partial_bound(bits: int, group: int, lanes: int, trips: int, k: int) -> None:
    rng = np.random.default_rng(bits + k + group)
    n = 37
    gw = quantize_group(rng.standard_normal((n, k)).astype(np.float16), bits, group)
    x = (10 * rng.standard_normal((1, k))).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    y = gemv_group_partial_ref(x, gw.qweight, gw.scales, gw.zeros, bits, gw.group_size, k, lanes,
                               trips, bias)
    assert y.dtype == np.float16 and y.shape == (1, n)
    assert_close_bound(y, gemm_float64(x, dequantize_group(gw), bias), _bound(gw, x, trips, bias),
                       f"twin int{bits}")


def test_the_bound_catches_a_dropped_term() -> None:
    rng = np.random.default_rng(3)
    gw = quantize_group(rng.standard_normal((16, 256)).astype(np.float16), 4, 128)
    x = rng.standard_normal((1, 256)).astype(np.float16)
    x[0, 7] = 64  # one term well above the bound's fp16-sized share of sum |x||w|
    y = gemv_group_partial_ref(x, gw.qweight, gw.scales, gw.zeros, 4, 128, 256, 32, 4)
    dropped = x.copy()
    dropped[0, 7] = 0
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close_bound(y, gemm_float64(dropped, dequantize_group(gw)), _bound(gw, x, 4), "drop")


@pytest.mark.parametrize("bits", (4, 3, 2))
def test_partial_sums_at_the_fp16_maximum_stay_finite(bits: int) -> None:
    """|p| <= trips (2^b - 1) 2^-E 65504 <= 65504: E = ceil(log2(trips (2^b - 1)))."""
    assert 4 * ((1 << bits) - 1) <= 2 ** partial_exp(bits, 4) < 8 * ((1 << bits) - 1)
    n, k = 4, 128
    gw = GroupQuantWeight(pack_codes(np.full((n, k), (1 << bits) - 1, np.uint8), bits),
                          np.full((n, 1), 2.0**-8, np.float16), np.zeros((n, 1), np.float16),
                          bits, 128, k, n)
    x = np.zeros((1, k), dtype=np.float16)
    x[0, 3::32] = -65504.0
    y = gemv_group_partial_ref(x, gw.qweight, gw.scales, gw.zeros, bits, 128, k, 32, 4)
    assert np.all(np.isfinite(y))
    assert_close_bound(y, gemm_float64(x, dequantize_group(gw)), _bound(gw, x, 4), "top")


def test_bad_arguments_are_errors() -> None:
    gw = quantize_group(np.ones((2, 64), np.float16), 4, 64)
    x = np.ones((1, 64), np.float16)
    with pytest.raises(ValueError, match="must divide group_size"):
        gemv_group_partial_ref(x, gw.qweight, gw.scales, gw.zeros, 4, 64, 64, 32, 4)
    with pytest.raises(ValueError, match="expected float16"):
        gemv_group_partial_ref(x[:, :32], gw.qweight, gw.scales, gw.zeros, 4, 64, 64, 32, 2)
