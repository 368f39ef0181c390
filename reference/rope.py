"""Reference rotary position embedding, GPT-NeoX "rotate half" style, full or partial.

On the first rot_dim dims of each head (rot_dim even, <= D), with h = rot_dim / 2:
    inv_freq[i] = fp32(theta ** (-2i / rot_dim))      (float64, rounded once: opspec.rope_inv_freq)
    angle[t, i] = fp32(fp32(pos[t]) * inv_freq[i])    (one fp32 product: opspec.rope_angles)
    out[i]      = fp16(x[i] * cos - x[i + h] * sin)    i < h
    out[i + h]  = fp16(x[i + h] * cos + x[i] * sin)
with cos, sin the fp32 cos/sin of the angle; dims past rot_dim are copied unchanged. The angle table
is part of the op's definition (mpsim/opspec.py): kernels take it (or cos/sin from it) rather than
recomputing powers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.opspec import rope_angles
from mpsim.reference.fp16 import widen


@njit(cache=True)
def rope_f32(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """x (T, H, D) fp32, angles (T, h) fp32 -> (T, H, D) fp32 (dims >= 2h copied)."""
    t_total, heads = x.shape[0], x.shape[1]
    h = angles.shape[1]
    out = x.copy()
    for t in range(t_total):
        for i in range(h):
            c, s = np.cos(angles[t, i]), np.sin(angles[t, i])
            for hd in range(heads):
                x1, x2 = x[t, hd, i], x[t, hd, i + h]
                out[t, hd, i] = x1 * c - x2 * s
                out[t, hd, i + h] = x2 * c + x1 * s
    return out


def rope_ref(x: np.ndarray, positions: np.ndarray, rot_dim: int, theta: float) -> np.ndarray:
    """fp16 x (T, H, D), positions (T,) -> fp16 (T, H, D) with the first rot_dim dims rotated."""
    x32 = widen(x, "x", 3)
    if rot_dim > x32.shape[2]:
        raise ValueError(f"rot_dim={rot_dim} exceeds head_dim {x32.shape[2]}")
    angles = rope_angles(positions, rot_dim, theta)
    if angles.shape[0] != x32.shape[0]:
        raise ValueError(f"positions: expected {x32.shape[0]} (one per token), got {angles.shape[0]}")
    return rope_f32(x32, angles).astype(np.float16)
