"""Reference rotary position embedding, GPT-NeoX "rotate half" style, full or partial.

On the first rot_dim dims of each head (rot_dim even, <= D), with h = rot_dim / 2:
    inv_freq[i] = fp32(theta ** (-2i / rot_dim))      (float64, rounded once: rope_inv_freq)
    angle[t, i] = fp32(fp32(pos[t]) * inv_freq[i])    (one fp32 product: rope_angles)
    out[i]      = fp16(x[i] * cos - x[i + h] * sin)    i < h
    out[i + h]  = fp16(x[i + h] * cos + x[i] * sin)
with cos, sin the fp32 cos/sin of the angle; dims past rot_dim are copied unchanged. The angle table
is part of the op's definition: kernels take it (or cos/sin from it) rather than recomputing powers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp16 import widen


def rope_inv_freq(rot_dim: int, theta: float) -> np.ndarray:
    """(rot_dim/2,) fp32 inverse frequencies."""
    if rot_dim < 2 or rot_dim % 2:
        raise ValueError(f"rot_dim={rot_dim}: expected a positive even number")
    if theta <= 1:
        raise ValueError(f"theta={theta}: expected a base > 1 (e.g. 10000)")
    return (float(theta) ** (-np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim)).astype(np.float32)


def rope_angles(positions: np.ndarray, rot_dim: int, theta: float) -> np.ndarray:
    """(T,) integer positions -> (T, rot_dim/2) fp32 angles."""
    pos = np.asarray(positions)
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer) or (pos < 0).any():
        raise ValueError(f"positions: expected non-negative integers (T,), got {pos.dtype} {pos.shape}")
    if (pos >= 2**24).any():
        raise ValueError("positions: values >= 2^24 are not exact in fp32")
    return pos.astype(np.float32)[:, None] * rope_inv_freq(rot_dim, theta)[None, :]


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
