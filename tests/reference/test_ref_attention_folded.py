"""The folded decode twin (reference/attention_folded.py) against float64 attention over K = c s + z,
V = c s + z computed exactly, within attention_bound(folded=folded_magnitudes(...))."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.attention_folded import attention_decode_folded_ref
from mpsim.reference.exact import attention_float64, expand_kv_heads
from mpsim.reference.kv_quant import kv_quant_ref, unpack_int4
from mpsim.reference.tolerance import assert_close_bound, attention_bound, folded_magnitudes

HEADS = st.sampled_from(((4, 4), (4, 1), (6, 2)))  # (Hq, Hkv): MHA, MQA, GQA


def _rand(rng: np.random.Generator, shape: tuple, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _parts(x: np.ndarray, bits: int) -> tuple[np.ndarray, ...]:
    """(packed codes, scale, zero, codes float64) of fp16 rows (B, H, T, D)."""
    packed, scale, zero = kv_quant_ref(x, bits)
    codes = unpack_int4(packed) if bits == 4 else packed
    return packed, scale, zero, codes.astype(np.float64)


def _check(out: np.ndarray, q: np.ndarray, k: tuple, v: tuple, lens: np.ndarray,
           sm_scale: float, what: str) -> None:
    hq = q.shape[1]
    for b, n in enumerate(lens):
        parts = []
        for _, s, z, c in (k, v):
            parts.append(tuple(expand_kv_heads(a[b, :, :n], hq, 0) for a in
                               (c, s.astype(np.float64), z.astype(np.float64))))
        kx, vx = (c * s[..., None] + z[..., None] for c, s, z in parts)
        qb = q[b][:, None, :]
        mask = np.ones((hq, 1, int(n)), bool)
        mags = folded_magnitudes(qb, parts[0], parts[1])
        bound = attention_bound(qb, kx, vx, sm_scale, mask, folded=mags)
        assert_close_bound(out[b][:, None, :], attention_float64(qb, kx, vx, sm_scale, mask),
                           bound, f"{what} b={b}")


@settings(max_examples=10, deadline=None)
@given(heads=HEADS, d=st.sampled_from((16, 128)), k_bits=st.sampled_from((8, 4)),
       v_bits=st.sampled_from((8, 4)),
       lens=st.lists(st.integers(1, 129), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_folded_decode_matches_float64(heads, d, k_bits, v_bits, lens, seed) -> None:
    hq, hkv = heads
    rng = np.random.default_rng(seed)
    q = _rand(rng, (3, hq, d), 2.0)
    k = _parts(_rand(rng, (3, hkv, 129, d), 1.5), k_bits)
    v = _parts(_rand(rng, (3, hkv, 129, d), 1.5), v_bits)
    kv_len = np.array(lens)
    out = attention_decode_folded_ref(q, k[0], v[0], kv_len, k_bits, v_bits, k[1], k[2], v[1],
                                      v[2], sm_scale=0.1)
    _check(out, q, k, v, kv_len, 0.1, f"folded k{k_bits} v{v_bits}")


def test_the_folded_bound_catches_a_wrong_zero() -> None:
    rng = np.random.default_rng(5)
    q = _rand(rng, (1, 1, 64), 2.0)
    k = _parts(_rand(rng, (1, 1, 64, 64), 2.0), 4)
    v = _parts(_rand(rng, (1, 1, 64, 64), 2.0), 4)
    off = (v[2].astype(np.float32) + np.float32(2.0**-6)).astype(np.float16)  # every V zero moved
    wrong = attention_decode_folded_ref(q, k[0], v[0], np.array([64]), 4, 4, k[1], k[2], v[1],
                                        off, sm_scale=0.125)
    with pytest.raises(AssertionError, match="outside the bound"):
        _check(wrong, q, k, v, np.array([64]), 0.125, "wrong zero")


@pytest.mark.parametrize(("bits", "width", "match"), [(16, 8, "takes int8/int4 KV"),
                                                      (4, 8, r"uint8 \(B, Hkv, T, 4\)")])
def test_folded_decode_bad_arguments(bits: int, width: int, match: str) -> None:
    q = np.zeros((1, 2, 8), np.float16)
    cache = np.zeros((1, 1, 4, width), np.uint8)
    sz = np.zeros((1, 1, 4), np.float16)
    with pytest.raises(ValueError, match=match):
        attention_decode_folded_ref(q, cache, cache, np.array([4]), bits, bits, sz, sz, sz, sz)
