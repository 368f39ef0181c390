"""Any-precision format: nesting, bit-plane layout, LUT = weighted cluster means, exact 2-means."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.anyprec import (
    codes_to_planes,
    dequantize_anyprec,
    planes_to_codes,
    quantize_anyprec,
)
from mpsim.reference.anyprec_cluster import cluster_row
from mpsim.reference.group_quant import dequantize_group, quantize_group
from mpsim.reference.tolerance import FP16_HALF_SUBNORMAL, U16

SETTINGS = settings(max_examples=20, deadline=None)
WIDTHS = st.sampled_from(((4, 2), (4, 3), (6, 2), (8, 3)))  # (parent, seed)


def _weights(seed: int, n: int, k: int, dist: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    raw = rng.standard_t(3, (n, k)) if dist == "t3" else rng.standard_normal((n, k))
    if dist == "few":  # many ties: only 5 distinct values
        raw = rng.integers(-2, 3, (n, k)).astype(np.float64)
    return (raw * 0.02).astype(np.float16), rng.uniform(0.1, 10, (n, k))


@SETTINGS
@given(
    widths=WIDTHS,
    n=st.sampled_from((1, 7)),
    k=st.sampled_from((1, 7, 33, 129)),
    dist=st.sampled_from(("normal", "t3", "few")),
    weighted=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_nesting_and_luts_are_weighted_cluster_means(
    widths: tuple[int, int], n: int, k: int, dist: str, weighted: bool, seed: int
) -> None:
    parent, seed_bits = widths
    w, sens = _weights(seed, n, k, dist)
    s = sens if weighted else np.ones_like(sens)
    apw = quantize_anyprec(w, parent, seed_bits, sens if weighted else None)
    assert apw.qweight.shape == (parent, n, -(-k // 32)) and apw.qweight.dtype == np.int32
    top = planes_to_codes(apw.qweight, parent, k)
    w64 = w.astype(np.float64)
    for b in range(seed_bits, parent + 1):
        codes = planes_to_codes(apw.qweight, b, k)
        np.testing.assert_array_equal(codes, top >> (parent - b))
        lut = apw.luts[b]
        assert lut.dtype == np.float16 and lut.shape == (n, 1 << b)
        for r in range(n):
            for c in np.unique(codes[r]):
                sel = codes[r] == c
                mean = np.average(w64[r, sel], weights=s[r, sel])
                slack = U16 * abs(mean) + FP16_HALF_SUBNORMAL + 1e-12
                assert abs(float(lut[r, c]) - mean) <= slack
        deq = dequantize_anyprec(apw, b)
        np.testing.assert_array_equal(deq, np.take_along_axis(lut, codes.astype(np.intp), 1))


@SETTINGS
@given(widths=WIDTHS, k=st.sampled_from((7, 64, 129)), seed=st.integers(0, 2**31))
def test_codes_and_luts_are_monotone_in_the_weight(widths: tuple[int, int], k: int, seed: int) -> None:
    parent, seed_bits = widths
    w, _ = _weights(seed, 3, k, "t3")
    apw = quantize_anyprec(w, parent, seed_bits)
    codes = planes_to_codes(apw.qweight, parent, k)
    for r in range(3):
        order = np.argsort(w[r].astype(np.float32), kind="stable")
        assert (np.diff(codes[r][order].astype(int)) >= 0).all()
        for b in range(seed_bits, parent + 1):
            assert (np.diff(apw.luts[b][r].astype(np.float64)) >= 0).all()


def test_bit_plane_layout_msb_first_lsb_of_word_first() -> None:
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 16, (2, 64), dtype=np.uint8)
    planes = codes_to_planes(codes, 4).view(np.uint32)
    for j in range(4):
        for r in range(2):
            for word in range(2):
                expect = sum(((int(codes[r, word * 32 + i]) >> (3 - j)) & 1) << i for i in range(32))
                assert planes[j, r, word] == expect
    np.testing.assert_array_equal(planes_to_codes(planes.view(np.int32), 4, 64), codes)


def test_dequantize_reads_only_the_first_b_planes() -> None:
    w, _ = _weights(5, 4, 96, "normal")
    apw = quantize_anyprec(w, 6, 2)
    noise = np.random.default_rng(0).integers(-(2**31), 2**31, apw.qweight.shape, dtype=np.int64)
    for b in range(2, 7):
        qw = apw.qweight.copy()
        qw[b:] = noise[b:].astype(np.int32)
        spoiled = dataclasses.replace(apw, qweight=qw)
        np.testing.assert_array_equal(dequantize_anyprec(spoiled, b), dequantize_anyprec(apw, b))


def _sse(v: np.ndarray, s: np.ndarray) -> float:
    return float((s * (v - np.average(v, weights=s)) ** 2).sum()) if v.size else 0.0


@SETTINGS
@given(k=st.integers(2, 40), seed=st.integers(0, 2**31))
def test_split_is_the_exact_weighted_two_means(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = np.sort(np.round(rng.standard_normal(k), 2))
    s = rng.uniform(0.1, 3, k)
    codes, _ = cluster_row(v, s, 1, 2, 50)  # seed 1: a 2-means; parent 2: each half split again
    for half in (0, 1):
        members = np.flatnonzero(codes >> 1 == half)
        if members.size < 2:
            continue
        vv, ss = v[members], s[members]
        got = _sse(vv[codes[members] & 1 == 0], ss[codes[members] & 1 == 0]) + _sse(
            vv[codes[members] & 1 == 1], ss[codes[members] & 1 == 1]
        )
        cuts = [t for t in range(1, vv.size) if vv[t - 1] < vv[t]]
        best = min((_sse(vv[:t], ss[:t]) + _sse(vv[t:], ss[t:]) for t in cuts), default=_sse(vv, ss))
        assert got <= best * (1 + 1e-9) + 1e-15


def test_sensitivity_pulls_centroids() -> None:
    w = np.linspace(-1, 1, 64, dtype=np.float32)[None, :].astype(np.float16)
    s = np.ones((1, 64))
    s[0, -1] = 1e6  # the largest weight dominates its cluster's mean
    apw = quantize_anyprec(w, 4, 2, s)
    assert dequantize_anyprec(apw, 4)[0, -1] == w[0, -1]


@pytest.mark.parametrize("bits", (2, 3, 4))
def test_lower_mse_than_uniform_at_the_same_bits_per_weight(bits: int) -> None:
    k = 1024
    w = (np.random.default_rng(11).standard_normal((32, k)) * 0.02).astype(np.float16)
    apw = quantize_anyprec(w, 4, 2)
    # same budget: N*K*b + N*2^b*16 bits (LUT) = N*K*b + N*(K/G)*32 bits (scale + zero)
    group = 2 * k // (1 << bits)
    gw = quantize_group(w, bits, group)
    w64 = w.astype(np.float64)
    mse_ap = np.mean((dequantize_anyprec(apw, bits) - w64) ** 2)
    mse_rtn = np.mean((dequantize_group(gw) - w64) ** 2)
    assert mse_ap < mse_rtn


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"parent_bits": 3}, "parent_bits=3"),
        ({"seed_bits": 4}, "seed_bits=4"),
        ({"sensitivity": -np.ones((2, 40))}, "non-negative"),
        ({"sensitivity": np.zeros((2, 40))}, "row 0 sums to 0"),
    ],
)
def test_bad_arguments_name_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        quantize_anyprec(np.ones((2, 40), np.float16), **kwargs)


def test_reading_outside_seed_to_parent_is_an_error() -> None:
    apw = quantize_anyprec(np.ones((2, 40), np.float16), 4, 2)
    with pytest.raises(ValueError, match=r"readable at 2\.\.4 bits"):
        dequantize_anyprec(apw, 5)
