"""Reference residual add and embedding gather: both exact.

residual_add: fp16(fp32(a) + fp32(b)). fp32 has 24 >= 2*11 + 2 significand bits, so rounding the
fp32 sum to fp16 equals rounding the exact sum once (no double-rounding error): the result is the
correctly rounded fp16 sum on every backend, and tests compare with ==.
embedding: table[ids], a copy.
"""

from __future__ import annotations

import numpy as np

from mpsim.reference.fp16 import widen


def residual_add_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp16 a + fp16 b (same shape) -> fp16, correctly rounded."""
    a32, b32 = widen(a, "a"), widen(b, "b")
    if a32.shape != b32.shape:
        raise ValueError(f"residual_add: shapes differ, {a32.shape} vs {b32.shape}")
    return (a32 + b32).astype(np.float16)


def embedding_ref(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Integer ids (any shape) and an fp16 table (V, H) -> fp16 [..., H]."""
    ids = np.asarray(ids)
    table = np.asarray(table)
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids: expected integers, got {ids.dtype}")
    if table.ndim != 2:
        raise ValueError(f"table: expected (V, H), got shape {table.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise ValueError(f"ids: values must be in 0..{table.shape[0] - 1}, got {ids.min()}..{ids.max()}")
    return table[ids]
