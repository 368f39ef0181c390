"""Reference prefill attention: causal (or full) self-attention over fp16 Q, K, V with GQA.

Each (sequence b, query head h, position i) row goes through
reference/attention_common.py::attend_row over keys 0..i (causal) or 0..len-1 (full), where len is
seq_lens[b] (default T). Rows at positions >= seq_lens[b] are padding: their output is 0. Query head
h reads KV head h // (Hq / Hkv). Output rounded to fp16 once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.attention_common import attend_row, check_gqa, default_sm_scale


@njit(cache=True)
def prefill_f32(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    seq_lens: np.ndarray,
    causal: bool,
    sm_scale: np.float32,
) -> np.ndarray:
    """q (B, Hq, T, D), kt (B, Hkv, D, T), v (B, Hkv, T, D) fp32 -> (B, Hq, T, D) fp32."""
    b_total, hq_total, t_total, d = q.shape
    group = hq_total // kt.shape[1]
    out = np.zeros((b_total, hq_total, t_total, d), dtype=np.float32)
    scores = np.empty(t_total, dtype=np.float32)
    for b in range(b_total):
        for h in range(hq_total):
            hk = h // group
            for i in range(seq_lens[b]):
                length = i + 1 if causal else seq_lens[b]
                attend_row(q[b, h, i], kt[b, hk], v[b, hk], length, sm_scale, scores, out[b, h, i])
    return out


def attention_prefill_ref(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    causal: bool = True,
    sm_scale: float | None = None,
    seq_lens: np.ndarray | None = None,
) -> np.ndarray:
    """fp16 q (B, T, Hq, D), k and v (B, T, Hkv, D) -> fp16 (B, T, Hq, D)."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.dtype != np.float16 or a.ndim != 4:
            raise ValueError(f"{name}: expected fp16 (B, T, H, D), got {a.dtype} {a.shape}")
    b_total, t_total, hq, d = q.shape
    if k.shape != v.shape or k.shape[:2] != (b_total, t_total) or k.shape[3] != d:
        raise ValueError(f"k {k.shape} / v {v.shape} do not match q {q.shape}")
    check_gqa(hq, k.shape[2])
    lens = np.full(b_total, t_total, np.int64) if seq_lens is None else np.asarray(seq_lens, np.int64)
    if lens.shape != (b_total,) or (lens < 0).any() or (lens > t_total).any():
        raise ValueError(f"seq_lens: expected (B,) values in 0..{t_total}, got {seq_lens!r}")
    qh = np.ascontiguousarray(q.transpose(0, 2, 1, 3), dtype=np.float32)
    kt = np.ascontiguousarray(k.transpose(0, 2, 3, 1), dtype=np.float32)
    vh = np.ascontiguousarray(v.transpose(0, 2, 1, 3), dtype=np.float32)
    out = prefill_f32(qh, kt, vh, lens, bool(causal), default_sm_scale(sm_scale, d))
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3)).astype(np.float16)
