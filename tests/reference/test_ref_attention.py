"""Reference attention (prefill and decode; GQA; fp16/int8/int4 KV) against float64 within the bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.attention_decode import attention_decode_ref
from mpsim.reference.attention_prefill import attention_prefill_ref
from mpsim.reference.exact import attention_float64, causal_mask, expand_kv_heads
from mpsim.reference.kv_quant import kv_dequant_ref, kv_quant_ref
from mpsim.reference.tolerance import assert_close_bound, attention_bound

SETTINGS = settings(max_examples=10, deadline=None)
HEADS = st.sampled_from(((4, 4), (4, 1), (6, 2)))  # (Hq, Hkv): MHA, MQA, GQA


def _rand(rng: np.random.Generator, shape: tuple, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _check_rows(out, q, k, v, sm_scale, mask, what) -> None:
    """q (..., Tq, D), k/v (..., Tk, D) with heads matched; compare against float64 row by row."""
    expect = attention_float64(q, k, v, sm_scale, mask)
    assert_close_bound(out, expect, attention_bound(q, k, v, sm_scale, mask), what)


@SETTINGS
@given(
    heads=HEADS,
    t=st.sampled_from((1, 7, 33)),
    d=st.sampled_from((16, 64)),
    lens=st.lists(st.integers(0, 33), min_size=2, max_size=2),
    causal=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_prefill_matches_float64(heads, t, d, lens, causal, seed) -> None:
    hq, hkv = heads
    rng = np.random.default_rng(seed)
    q, k, v = _rand(rng, (2, t, hq, d), 2.0), _rand(rng, (2, t, hkv, d), 2.0), _rand(rng, (2, t, hkv, d))
    seq_lens = np.minimum(np.array(lens), t)
    seq_lens[0] = t
    out = attention_prefill_ref(q, k, v, causal=causal, seq_lens=seq_lens)
    sm = float(np.float32(1 / np.sqrt(d)))
    for b in range(2):
        n = int(seq_lens[b])
        assert (out[b, n:] == 0).all()
        if n == 0:
            continue
        qh = q[b, :n].transpose(1, 0, 2)
        kh = expand_kv_heads(k[b, :n].transpose(1, 0, 2), hq, 0)
        vh = expand_kv_heads(v[b, :n].transpose(1, 0, 2), hq, 0)
        mask = causal_mask(n, n) if causal else np.ones((n, n), bool)
        _check_rows(out[b, :n].transpose(1, 0, 2), qh, kh, vh, sm, mask, f"prefill b={b}")


def _cache(rng, b, hkv, tmax, d, bits):
    x = _rand(rng, (b, hkv, tmax, d), 1.5)
    if bits == 16:
        return x, None, None, x
    codes, scale, zero = kv_quant_ref(x, bits)
    return codes, scale, zero, kv_dequant_ref(codes, scale, zero, bits, d)


@SETTINGS
@given(
    heads=HEADS,
    d=st.sampled_from((16, 128)),
    k_bits=st.sampled_from((16, 8, 4)),
    v_bits=st.sampled_from((16, 8, 4)),
    lens=st.lists(st.integers(1, 129), min_size=3, max_size=3),
    seed=st.integers(0, 2**31),
)
def test_decode_matches_float64(heads, d, k_bits, v_bits, lens, seed) -> None:
    hq, hkv = heads
    rng = np.random.default_rng(seed)
    tmax = 129
    q = _rand(rng, (3, hq, d), 2.0)
    kc, ks, kz, kval = _cache(rng, 3, hkv, tmax, d, k_bits)
    vc, vs, vz, vval = _cache(rng, 3, hkv, tmax, d, v_bits)
    kv_len = np.array(lens)
    out = attention_decode_ref(q, kc, vc, kv_len, k_bits, v_bits, ks, kz, vs, vz, sm_scale=0.1)
    for b in range(3):
        n = int(kv_len[b])
        kh = expand_kv_heads(kval[b, :, :n], hq, 0)
        vh = expand_kv_heads(vval[b, :, :n], hq, 0)
        mask = np.ones((hq, 1, n), bool)
        what = f"decode k{k_bits} v{v_bits} b={b}"
        _check_rows(out[b][:, None, :], q[b][:, None, :], kh, vh, 0.1, mask, what)


def test_decode_equals_prefill_last_row() -> None:
    # the same rows through the same attend_row: bit-identical
    rng = np.random.default_rng(2)
    q, k, v = _rand(rng, (1, 20, 4, 32)), _rand(rng, (1, 20, 2, 32)), _rand(rng, (1, 20, 2, 32))
    pre = attention_prefill_ref(q, k, v)
    dec = attention_decode_ref(
        q[:, -1], k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), np.array([20]), 16, 16
    )
    np.testing.assert_array_equal(pre[:, -1], dec)


def test_the_bound_catches_a_wrong_scale() -> None:
    rng = np.random.default_rng(4)
    q, kv = _rand(rng, (1, 1, 64), 2.0), _rand(rng, (1, 1, 64, 64), 2.0)
    wrong = attention_decode_ref(q, kv, kv, np.array([64]), 16, 16, sm_scale=0.126)
    mask = np.ones((1, 1, 64), bool)
    with pytest.raises(AssertionError, match="outside the bound"):
        _check_rows(wrong[0][:, None], q[0][:, None], kv[0], kv[0], 0.125, mask, "wrong scale")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"kv_len": np.array([0])}, "kv_len"), ({"k_bits": 8}, "scale and zero")],
)
def test_decode_bad_arguments(kwargs, match) -> None:
    q = np.zeros((1, 2, 8), np.float16)
    cache = np.zeros((1, 1, 4, 8), np.float16)
    args = {"kv_len": np.array([4]), "k_bits": 16} | kwargs
    with pytest.raises(ValueError, match=match):
        attention_decode_ref(q, cache, cache, args["kv_len"], args["k_bits"], 16)


def test_prefill_gqa_head_mismatch_is_an_error() -> None:
    q, k = np.zeros((1, 3, 6, 8), np.float16), np.zeros((1, 3, 4, 8), np.float16)
    with pytest.raises(ValueError, match="not a multiple of 4 KV heads"):
        attention_prefill_ref(q, k, k)
