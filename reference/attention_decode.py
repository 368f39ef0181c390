"""Reference decode attention: one new query per sequence against a contiguous KV cache, GQA,
fp16 / int8 / int4 K and V (docs/formats.md layouts), fp32 softmax.

The cache is first dequantized to its exact fp16 values (reference/kv_quant.py; kernels dequantize
the same bits on the fly), widened to fp32, and each (sequence, query head) row goes through
reference/attention_common.py::attend_row over keys 0 .. kv_len[b] - 1. Query head h reads KV head
h // (Hq / Hkv). Output rounded to fp16 once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.attention_common import attend_row, check_gqa, default_sm_scale
from mpsim.reference.kv_quant import kv_dequant_ref


@njit(cache=True)
def decode_f32(
    q: np.ndarray, kt: np.ndarray, v: np.ndarray, kv_len: np.ndarray, sm_scale: np.float32
) -> np.ndarray:
    """q (B, Hq, D), kt (B, Hkv, D, T), v (B, Hkv, T, D) fp32, kv_len (B,) -> (B, Hq, D) fp32."""
    b_total, hq_total, d = q.shape
    group = hq_total // kt.shape[1]
    out = np.empty((b_total, hq_total, d), dtype=np.float32)
    scores = np.empty(kt.shape[3], dtype=np.float32)
    for b in range(b_total):
        for h in range(hq_total):
            hk = h // group
            attend_row(q[b, h], kt[b, hk], v[b, hk], kv_len[b], sm_scale, scores, out[b, h])
    return out


def cache_values(
    cache: np.ndarray,
    bits: int,
    scale: np.ndarray | None,
    zero: np.ndarray | None,
    d: int,
    name: str,
) -> np.ndarray:
    """A contiguous cache (B, Hkv, T, D or D*bits/8) -> its fp16 values widened to fp32."""
    if bits == 16:
        if cache.dtype != np.float16 or cache.ndim != 4 or cache.shape[3] != d:
            raise ValueError(f"{name}: expected fp16 (B, Hkv, T, {d}), got {cache.dtype} {cache.shape}")
        return cache.astype(np.float32)
    if scale is None or zero is None:
        raise ValueError(f"{name}: {bits}-bit KV needs its scale and zero (B, Hkv, T)")
    return kv_dequant_ref(cache, scale, zero, bits, d).astype(np.float32)


def attention_decode_ref(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    kv_len: np.ndarray,
    k_bits: int,
    v_bits: int,
    k_scale: np.ndarray | None = None,
    k_zero: np.ndarray | None = None,
    v_scale: np.ndarray | None = None,
    v_zero: np.ndarray | None = None,
    sm_scale: float | None = None,
) -> np.ndarray:
    """fp16 q (B, Hq, D) attending to cached keys 0..kv_len[b]-1 -> fp16 (B, Hq, D)."""
    q = np.asarray(q)
    if q.dtype != np.float16 or q.ndim != 3:
        raise ValueError(f"q: expected fp16 (B, Hq, D), got {q.dtype} {q.shape}")
    b_total, hq, d = q.shape
    k = cache_values(np.asarray(k_cache), k_bits, k_scale, k_zero, d, "k_cache")
    v = cache_values(np.asarray(v_cache), v_bits, v_scale, v_zero, d, "v_cache")
    if k.shape != v.shape or k.shape[0] != b_total:
        raise ValueError(f"k_cache {k.shape} and v_cache {v.shape} must match q's batch {b_total}")
    check_gqa(hq, k.shape[1])
    lens = np.asarray(kv_len, dtype=np.int64)
    if lens.shape != (b_total,) or (lens < 1).any() or (lens > k.shape[2]).any():
        raise ValueError(f"kv_len: expected (B,) values in 1..{k.shape[2]}, got {kv_len!r}")
    kt = np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    out = decode_f32(q.astype(np.float32), kt, v, lens, default_sm_scale(sm_scale, d))
    return out.astype(np.float16)
