"""Reference norms, RoPE, activations, residual add, embedding and argmax."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.opspec import rope_angles
from mpsim.reference.activations import gelu_ref, silu_mul_ref
from mpsim.reference.elementwise import embedding_ref, residual_add_ref
from mpsim.reference.exact import (
    gelu_float64,
    layer_norm_float64,
    rms_norm_float64,
    rope_float64,
    silu_mul_float64,
)
from mpsim.reference.norms import layer_norm_ref, rms_norm_ref
from mpsim.reference.rope import rope_ref
from mpsim.reference.sampling import argmax_ref
from mpsim.reference.tolerance import (
    assert_close_bound,
    gelu_bound,
    layer_norm_bound,
    rms_norm_bound,
    rope_bound,
    silu_mul_bound,
)

SETTINGS = settings(max_examples=15, deadline=None)
ROWS = st.sampled_from((1, 7, 33))
DIMS = st.sampled_from((1, 7, 129, 4096))


def _rand(seed: int, shape: tuple, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + offset).astype(np.float16)


@SETTINGS
@given(rows=ROWS, d=DIMS, scale=st.sampled_from((1e-3, 1.0, 100.0)), seed=st.integers(0, 2**31))
def test_rms_norm(rows: int, d: int, scale: float, seed: int) -> None:
    x, w = _rand(seed, (rows, d), scale), _rand(seed + 1, (d,))
    y = rms_norm_ref(x, w, 1e-6)
    assert_close_bound(y, rms_norm_float64(x, w, 1e-6), rms_norm_bound(x, w, 1e-6), "rms_norm")


@SETTINGS
@given(
    rows=ROWS,
    d=st.sampled_from((2, 7, 129, 2560)),
    offset=st.sampled_from((0.0, 30.0)),
    seed=st.integers(0, 2**31),
)
def test_layer_norm(rows: int, d: int, offset: float, seed: int) -> None:
    x = _rand(seed, (rows, d), 1.0, offset)
    w, b = _rand(seed + 1, (d,)), _rand(seed + 2, (d,))
    y = layer_norm_ref(x, w, b, 1e-5)
    expect, bound = layer_norm_float64(x, w, b, 1e-5), layer_norm_bound(x, w, b, 1e-5)
    assert_close_bound(y, expect, bound, "layer_norm")


@SETTINGS
@given(
    t=st.sampled_from((1, 7, 33)),
    heads=st.sampled_from((1, 3)),
    dims=st.sampled_from(((128, 128), (80, 20), (64, 32), (7, 6))),
    theta=st.sampled_from((10000.0, 500000.0)),
    seed=st.integers(0, 2**31),
)
def test_rope_full_and_partial(t: int, heads: int, dims: tuple, theta: float, seed: int) -> None:
    d, rot = dims
    x = _rand(seed, (t, heads, d))
    pos = np.random.default_rng(seed).integers(0, 8192, t)
    y = rope_ref(x, pos, rot, theta)
    angles = rope_angles(pos, rot, theta)
    np.testing.assert_array_equal(y[..., rot:], x[..., rot:])  # the pass-through dims are exact
    expect = rope_float64(x, angles, rot)[..., :rot]
    cos = np.cos(angles.astype(np.float64))[:, None, :]
    sin = np.sin(angles.astype(np.float64))[:, None, :]
    assert_close_bound(y[..., :rot], expect, rope_bound(x[..., :rot], cos, sin), "rope")


def test_rope_rotates_by_the_position_angle() -> None:
    x = np.zeros((2, 1, 4), np.float16)
    x[:, 0, 0] = 1.0  # (x1, x2) = (1, 0) in pair 0
    y = rope_ref(x, np.array([0, 1]), 4, 10000.0)
    assert y[0, 0, 0] == 1 and y[0, 0, 2] == 0  # position 0: identity
    assert y[1, 0, 0] == np.float16(np.cos(1.0)) and y[1, 0, 2] == np.float16(np.sin(1.0))


@SETTINGS
@given(
    rows=ROWS, f=st.sampled_from((1, 7, 129)), scale=st.sampled_from((1.0, 8.0)), seed=st.integers(0, 2**31)
)
def test_silu_mul(rows: int, f: int, scale: float, seed: int) -> None:
    gu = _rand(seed, (rows, 2 * f), scale)
    y = silu_mul_ref(gu)
    assert y.shape == (rows, f)
    bound = silu_mul_bound(gu[:, :f], gu[:, f:])
    assert_close_bound(y, silu_mul_float64(gu), bound, "silu_mul")


@SETTINGS
@given(
    shape=st.sampled_from(((7,), (3, 33), (2, 2, 129))),
    scale=st.sampled_from((1.0, 6.0)),
    seed=st.integers(0, 2**31),
)
def test_gelu(shape: tuple, scale: float, seed: int) -> None:
    x = _rand(seed, shape, scale)
    assert_close_bound(gelu_ref(x), gelu_float64(x), gelu_bound(x), "gelu")


def test_gelu_is_the_tanh_approximation_not_erf() -> None:
    x = np.array([1.0], np.float16)
    assert gelu_ref(x)[0] == np.float16(0.8411920070648193)  # tanh form; erf form gives 0.8413447


@SETTINGS
@given(shape=st.sampled_from(((1,), (7, 33), (3, 129))), seed=st.integers(0, 2**31))
def test_residual_add_is_correctly_rounded(shape: tuple, seed: int) -> None:
    a, b = _rand(seed, shape, 300.0), _rand(seed + 1, shape, 1e-3)
    exact = (a.astype(np.float64) + b.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(residual_add_ref(a, b), exact)


def test_embedding_gathers_rows_and_checks_ids() -> None:
    table = _rand(0, (10, 4))
    ids = np.array([[3, 0], [9, 3]])
    np.testing.assert_array_equal(embedding_ref(ids, table), table[ids])
    with pytest.raises(ValueError, match=r"0\.\.9"):
        embedding_ref(np.array([10]), table)


@SETTINGS
@given(b=st.integers(1, 4), v=st.sampled_from((1, 7, 32000)), seed=st.integers(0, 2**31))
def test_argmax_ties_go_to_the_lowest_index(b: int, v: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.integers(-3, 4, (b, v)).astype(np.float16)  # many ties
    got = argmax_ref(logits)
    assert got.dtype == np.int64
    for r in range(b):
        assert got[r] == np.flatnonzero(logits[r] == logits[r].max())[0]


def test_argmax_rejects_nan_and_handles_inf() -> None:
    assert argmax_ref(np.array([[-np.inf, np.inf, np.inf]], np.float16))[0] == 1
    with pytest.raises(ValueError, match="row 0 contains nan"):
        argmax_ref(np.array([[0.0, np.nan]], np.float32))
