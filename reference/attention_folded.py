"""Reference twin of decode attention over an int8/int4 KV cache with scale and zero folded out
(kernels/kv_fold.py): the same order of operations, in fp32, on the codes.

For one query row q (D,) and keys 0..L-1 of one KV head, codes c (integers, exact in fp32), per-token
scale s and zero z (fp16 values), d and j ascending everywhere:
    Q     = sum_d q_d                                   one fp32 accumulator
    t_j   = sum_d q_d ck_jd                             one fp32 accumulator per key
    s_j   = fl(fl(fl(sk_j t_j) + fl(zk_j Q)) * sm_scale)
    e_j   = exp(fl(s_j - max_j s_j)),  l = sum_j e_j
    Z     = sum_j fl(e_j zv_j)
    o_d   = fl(fl(sum_j fl(fl(e_j sv_j) cv_jd)) + Z) / l
then o is rounded to fp16. The float64 model it is within reference/tolerance.py's attention_bound
(folded=folded_magnitudes(...)) of is attention over K = ck sk + zk and V = cv sv + zv computed
exactly (not rounded to fp16 first, as reference/kv_quant.py's dequantized values are).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.attention_common import check_gqa, default_sm_scale
from mpsim.reference.kv_quant import KV_BITS, unpack_int4


@njit(cache=True)
def attend_row_folded(q: np.ndarray, kct: np.ndarray, ks: np.ndarray, kz: np.ndarray,
                      vc: np.ndarray, vs: np.ndarray, vz: np.ndarray, length: int,
                      sm_scale: np.float32, scores: np.ndarray, out: np.ndarray) -> None:
    """q (D,), kct (D, T) K codes transposed, ks/kz/vs/vz (T,), vc (T, D) fp32; out (D,) fp32."""
    d_total = q.size
    qsum = np.float32(0.0)
    for d in range(d_total):
        qsum += q[d]
    sc = scores[:length]
    sc[:] = np.float32(0.0)
    for d in range(d_total):  # d outer, keys inner: each t_j still sums d ascending
        qd = q[d]
        krow = kct[d, :length]
        for j in range(length):
            sc[j] += qd * krow[j]
    m = -np.inf
    for j in range(length):
        scores[j] = (ks[j] * scores[j] + kz[j] * qsum) * sm_scale
        m = max(m, scores[j])
    total = np.float32(0.0)
    zsum = np.float32(0.0)
    for j in range(length):
        scores[j] = np.exp(scores[j] - np.float32(m))
        total += scores[j]
        zsum += scores[j] * vz[j]
    out[:] = np.float32(0.0)
    for j in range(length):  # keys outer, d inner: each o_d still sums j ascending
        w = scores[j] * vs[j]
        vrow = vc[j]
        for d in range(d_total):
            out[d] += w * vrow[d]
    for d in range(d_total):
        out[d] = (out[d] + zsum) / total


@njit(cache=True)
def decode_folded_f32(q: np.ndarray, kct: np.ndarray, ks: np.ndarray, kz: np.ndarray,
                      vc: np.ndarray, vs: np.ndarray, vz: np.ndarray, kv_len: np.ndarray,
                      sm_scale: np.float32) -> np.ndarray:
    """q (B, Hq, D); kct (B, Hkv, D, T); vc (B, Hkv, T, D); scales/zeros (B, Hkv, T) -> fp32 o."""
    b_total, hq_total, d = q.shape
    group = hq_total // kct.shape[1]
    out = np.empty((b_total, hq_total, d), dtype=np.float32)
    scores = np.empty(kct.shape[3], dtype=np.float32)
    for b in range(b_total):
        for h in range(hq_total):
            hk = h // group
            attend_row_folded(q[b, h], kct[b, hk], ks[b, hk], kz[b, hk], vc[b, hk], vs[b, hk],
                              vz[b, hk], kv_len[b], sm_scale, scores, out[b, h])
    return out


def cache_codes(cache: np.ndarray, bits: int, d: int, name: str) -> np.ndarray:
    """A contiguous quantized cache (B, Hkv, T, D or D/2) uint8 -> its codes (B, Hkv, T, D) fp32."""
    if bits not in KV_BITS:
        raise ValueError(f"{name}: the folded decode takes int8/int4 KV, got bits={bits!r}")
    cache = np.asarray(cache)
    width = d if bits == 8 else d // 2
    if cache.dtype != np.uint8 or cache.ndim != 4 or cache.shape[3] != width:
        raise ValueError(f"{name}: expected uint8 (B, Hkv, T, {width}) for {bits}-bit KV with "
                         f"D={d}, got {cache.dtype} {cache.shape}")
    codes = unpack_int4(cache) if bits == 4 else cache
    return codes.astype(np.float32)


def attention_decode_folded_ref(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                                kv_len: np.ndarray, k_bits: int, v_bits: int,
                                k_scale: np.ndarray, k_zero: np.ndarray, v_scale: np.ndarray,
                                v_zero: np.ndarray, sm_scale: float | None = None) -> np.ndarray:
    """fp16 q (B, Hq, D) attending to quantized keys 0..kv_len[b]-1, folded order -> fp16."""
    q = np.asarray(q)
    if q.dtype != np.float16 or q.ndim != 3:
        raise ValueError(f"q: expected fp16 (B, Hq, D), got {q.dtype} {q.shape}")
    b_total, hq, d = q.shape
    kc = cache_codes(k_cache, k_bits, d, "k_cache")
    vc = cache_codes(v_cache, v_bits, d, "v_cache")
    sz = [np.asarray(a, np.float16).astype(np.float32) for a in (k_scale, k_zero, v_scale, v_zero)]
    if kc.shape != vc.shape or kc.shape[0] != b_total or any(a.shape != kc.shape[:3] for a in sz):
        raise ValueError(f"k_cache {kc.shape}, v_cache {vc.shape} and scales/zeros "
                         f"{[a.shape for a in sz]} must match q's batch {b_total}")
    check_gqa(hq, kc.shape[1])
    lens = np.asarray(kv_len, dtype=np.int64)
    if lens.shape != (b_total,) or (lens < 1).any() or (lens > kc.shape[2]).any():
        raise ValueError(f"kv_len: expected (B,) values in 1..{kc.shape[2]}, got {kv_len!r}")
    kct = np.ascontiguousarray(kc.transpose(0, 1, 3, 2))
    out = decode_folded_f32(q.astype(np.float32), kct, *sz[:2], np.ascontiguousarray(vc),
                            *sz[2:], lens, default_sm_scale(sm_scale, d))
    return out.astype(np.float16)
