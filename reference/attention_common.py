"""The fp32 softmax-and-weighted-sum of one query row, shared by the prefill and decode references.

Order, for one query row q and the L keys it attends to (j ascending everywhere):
    s_j  = fl(fl(sum_d q_d k_jd) * sm_scale)     d ascending, one fp32 accumulator per key
    m    = max_j s_j
    e_j  = exp(fl(s_j - m))                       fp32 exp
    l    = sum_j e_j                              j ascending, one fp32 accumulator
    o_d  = fl(sum_j fl(e_j * v_jd)) / l           j ascending, one fp32 accumulator per d
then o is rounded to fp16 by the caller. Two passes over the keys (no online rescaling).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def attend_row(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    length: int,
    sm_scale: np.float32,
    scores: np.ndarray,
    out: np.ndarray,
) -> None:
    """q (D,), kt (D, T) keys transposed, v (T, D); attend to keys 0..length-1; out (D,) fp32."""
    d_total = q.size
    sc = scores[:length]
    sc[:] = np.float32(0.0)
    for d in range(d_total):  # d outer, keys inner: each s_j still sums d ascending
        qd = q[d]
        krow = kt[d, :length]  # contiguous slices so that LLVM vectorizes across keys
        for j in range(length):
            sc[j] += qd * krow[j]
    m = -np.inf
    for j in range(length):
        scores[j] = scores[j] * sm_scale
        m = max(m, scores[j])
    total = np.float32(0.0)
    for j in range(length):
        scores[j] = np.exp(scores[j] - np.float32(m))
        total += scores[j]
    out[:] = np.float32(0.0)
    for j in range(length):  # keys outer, d inner: each o_d still sums j ascending
        e = scores[j]
        vrow = v[j]
        for d in range(d_total):
            out[d] += e * vrow[d]
    for d in range(d_total):
        out[d] = out[d] / total


def default_sm_scale(sm_scale: float | None, head_dim: int) -> np.float32:
    """sm_scale as the fp32 value the references use; default fp32(1 / sqrt(head_dim))."""
    value = 1.0 / np.sqrt(head_dim) if sm_scale is None else sm_scale
    return np.float32(value)


def check_gqa(num_q_heads: int, num_kv_heads: int) -> int:
    """Query heads per KV head; an error unless Hq is a multiple of Hkv."""
    if num_kv_heads < 1 or num_q_heads % num_kv_heads:
        raise ValueError(f"GQA: {num_q_heads} query heads is not a multiple of {num_kv_heads} KV heads")
    return num_q_heads // num_kv_heads
