"""Reference greedy sampling: argmax over the vocabulary, ties to the lowest index. Exact.

NaN logits are an error (a kernel's argmax over NaN has no agreed answer); -inf and +inf are values.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def argmax_f32(logits: np.ndarray) -> np.ndarray:
    """(B, V) fp32 -> (B,) int64: first index of the maximum (strict > keeps the lowest)."""
    rows, v = logits.shape
    out = np.empty(rows, dtype=np.int64)
    for r in range(rows):
        best, best_i = logits[r, 0], 0
        for i in range(1, v):
            if logits[r, i] > best:
                best, best_i = logits[r, i], i
        out[r] = best_i
    return out


def argmax_ref(logits: np.ndarray) -> np.ndarray:
    """fp16/fp32 logits (B, V) -> int64 token ids (B,)."""
    lg = np.asarray(logits)
    if lg.dtype not in (np.float16, np.float32) or lg.ndim != 2 or lg.shape[1] < 1:
        raise ValueError(f"logits: expected float16/float32 (B, V), got {lg.dtype} {lg.shape}")
    bad = np.flatnonzero(np.isnan(lg).any(axis=1))
    if bad.size:
        raise ValueError(f"logits: row {int(bad[0])} contains nan")
    return argmax_f32(np.ascontiguousarray(lg, dtype=np.float32))
