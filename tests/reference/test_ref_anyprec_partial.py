"""The numba twin of the one-row any-precision GEMV's fp16 partial sums
(reference/gemm_anyprec.py::gemv_anyprec_partial_ref), pair_exp, and gemv_pair_partial_bound."""

from __future__ import annotations

import numpy as np
import pytest

from mpsim.reference.anyprec import dequantize_anyprec, pair_exp, quantize_anyprec
from mpsim.reference.exact import gemm_float64
from mpsim.reference.gemm_anyprec import gemv_anyprec_partial_ref
from mpsim.reference.tolerance import assert_close_bound, gemv_pair_partial_bound


@pytest.mark.parametrize(("bits", "lanes", "trips"), [(3, 32, 4), (2, 32, 4), (3, 16, 2), (1, 32, 8)])
@pytest.mark.parametrize(("k", "scale"), [(100, 1.0), (512, 0.05), (512, 200.0)])
def test_twin_within_the_partial_bound(bits: int, lanes: int, trips: int, k: int, scale: float) -> None:
    rng = np.random.default_rng(bits + k + lanes)
    n = 37
    apw = quantize_anyprec((scale * rng.standard_normal((n, k))).astype(np.float16), 4, 1)
    x = ((10 if scale <= 1 else 0.01) * rng.standard_normal((1, k))).astype(np.float16)  # y < 65504
    bias = rng.standard_normal(n).astype(np.float16)
    y = gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[bits], bits, k, lanes, trips, bias)
    assert y.dtype == np.float16 and y.shape == (1, n)
    w_hat = dequantize_anyprec(apw, bits)
    e = pair_exp(apw.luts[bits], trips)
    assert_close_bound(y, gemm_float64(x, w_hat, bias), gemv_pair_partial_bound(x, w_hat, e, trips, bias),
                       f"twin ap{bits}")


def test_the_bound_catches_a_dropped_term() -> None:
    rng = np.random.default_rng(3)
    apw = quantize_anyprec(rng.standard_normal((16, 256)).astype(np.float16), 4, 2)
    x = rng.standard_normal((1, 256)).astype(np.float16)
    x[0, 7] = 64  # one term well above the bound's fp16-sized share of sum |x||w|
    y = gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[3], 3, 256, 32, 4)
    dropped = x.copy()
    dropped[0, 7] = 0
    w_hat = dequantize_anyprec(apw, 3)
    bound = gemv_pair_partial_bound(x, w_hat, pair_exp(apw.luts[3], 4), 4)
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close_bound(y, gemm_float64(dropped, w_hat), bound, "drop")


def test_bad_arguments_are_errors() -> None:
    apw = quantize_anyprec(np.ones((2, 64), np.float16), 4, 2)
    x = np.ones((1, 64), np.float16)
    with pytest.raises(ValueError, match="bits"):
        gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[4], 4, 64, 32, 4)
    with pytest.raises(ValueError, match="one row"):
        gemv_anyprec_partial_ref(np.ones((2, 64), np.float16), apw.qweight, apw.luts[3], 3, 64, 32, 4)
    with pytest.raises(ValueError, match="lut"):
        gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[2], 3, 64, 32, 4)
