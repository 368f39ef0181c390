"""Reference GEMMs (fp16, group, any-precision) against float64 within the derived bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.anyprec import dequantize_anyprec, quantize_anyprec
from mpsim.reference.exact import gemm_float64
from mpsim.reference.gemm_anyprec import gemm_anyprec_ref, gemm_anyprec_weight_ref
from mpsim.reference.gemm_fp16 import gemm_fp16_ref
from mpsim.reference.gemm_group import gemm_group_ref, gemm_group_weight_ref
from mpsim.reference.group_quant import dequantize_group, quantize_group
from mpsim.reference.tolerance import assert_close_bound, gemm_bound

SETTINGS = settings(max_examples=12, deadline=None)
SHAPES = st.tuples(
    st.sampled_from((1, 7, 70)), st.sampled_from((1, 7, 129)), st.sampled_from((1, 7, 33, 129))
)


def _operands(seed: int, m: int, n: int, k: int, with_bias: bool) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = (rng.standard_t(4, (n, k)) * 0.05).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16) if with_bias else None
    return x, w, bias


def _check(y: np.ndarray, x: np.ndarray, w_hat: np.ndarray, bias: np.ndarray | None, what: str) -> None:
    assert y.dtype == np.float16 and y.shape == (x.shape[0], w_hat.shape[0])
    assert_close_bound(y, gemm_float64(x, w_hat, bias), gemm_bound(x, w_hat, bias), what)


@SETTINGS
@given(shape=SHAPES, with_bias=st.booleans(), seed=st.integers(0, 2**31))
def test_fp16_gemm_within_bound(shape: tuple, with_bias: bool, seed: int) -> None:
    x, w, bias = _operands(seed, *shape, with_bias)
    _check(gemm_fp16_ref(x, w, bias), x, w, bias, "fp16 gemm")


@SETTINGS
@given(
    shape=SHAPES,
    bits=st.sampled_from((2, 3, 4, 8)),
    group=st.sampled_from((32, 64, 128, -1)),
    sym=st.booleans(),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_group_gemm_within_bound(
    shape: tuple, bits: int, group: int, sym: bool, with_bias: bool, seed: int
) -> None:
    x, w, bias = _operands(seed, *shape, with_bias)
    gw = quantize_group(w, bits, group, symmetric=sym)
    _check(gemm_group_weight_ref(x, gw, bias), x, dequantize_group(gw), bias, f"int{bits} g{group}")


@SETTINGS
@given(shape=SHAPES, parent=st.sampled_from((4, 5)), with_bias=st.booleans(), seed=st.integers(0, 2**31))
def test_anyprec_gemm_within_bound_at_every_width(
    shape: tuple, parent: int, with_bias: bool, seed: int
) -> None:
    x, w, bias = _operands(seed, *shape, with_bias)
    apw = quantize_anyprec(w, parent, 2)
    for bits in range(2, parent + 1):
        y = gemm_anyprec_weight_ref(x, apw, bits, bias)
        _check(y, x, dequantize_anyprec(apw, bits), bias, f"anyprec {bits}")


def test_quantized_gemm_equals_fp16_gemm_on_the_dequantized_weight() -> None:
    # same accumulation order, same fp16 weight values: the results are identical, bit for bit
    x, w, bias = _operands(7, 9, 33, 129, True)
    gw = quantize_group(w, 3, 64)
    np.testing.assert_array_equal(
        gemm_group_weight_ref(x, gw, bias), gemm_fp16_ref(x, dequantize_group(gw), bias)
    )
    apw = quantize_anyprec(w, 4, 2)
    np.testing.assert_array_equal(
        gemm_anyprec_weight_ref(x, apw, 3, bias), gemm_fp16_ref(x, dequantize_anyprec(apw, 3), bias)
    )


def test_the_bound_catches_a_dropped_term() -> None:
    x, w, _ = _operands(3, 4, 16, 129, False)
    x[:, -1] = 1.0
    w[:, -1] = 0.01  # one small term, about 20 fp16 ulps of a typical output
    y_missing = gemm_fp16_ref(x[:, :-1], w[:, :-1])
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close_bound(y_missing, gemm_float64(x, w), gemm_bound(x, w), "dropped term")


def test_shape_mismatches_are_errors() -> None:
    x, w, _ = _operands(1, 2, 8, 64, False)
    gw = quantize_group(w, 4, 32)
    with pytest.raises(ValueError, match="x: expected float16"):
        gemm_fp16_ref(x[:, :10], w)
    with pytest.raises(ValueError, match="do not match qweight"):
        gemm_group_ref(x, gw.qweight, gw.scales[:, :1], gw.zeros, 4, 32, 64)
    apw = quantize_anyprec(w, 4, 2)
    with pytest.raises(ValueError, match="do not match qweight"):
        gemm_anyprec_ref(x, apw.qweight, apw.luts[2], 3, 64)
