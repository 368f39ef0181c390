"""What each op computes that a kernel and its reference twin must agree on.

The constants and tables that define an op, as opposed to how one implementation computes it: GELU's
fp32 coefficients and the RoPE angle table. kernels/ and reference/ both take them from here, so
neither imports the other. A leaf module: it imports numpy only.
"""

from __future__ import annotations

import numpy as np

GELU_C = float(np.float32(np.sqrt(2.0 / np.pi)))  # the fp32 constants of "gelu_new"
GELU_A = float(np.float32(0.044715))


def rope_inv_freq(rot_dim: int, theta: float) -> np.ndarray:
    """(rot_dim/2,) fp32 inverse frequencies: fp32(theta ** (-2i / rot_dim)), float64 rounded once."""
    if rot_dim < 2 or rot_dim % 2:
        raise ValueError(f"rot_dim={rot_dim}: expected a positive even number")
    if theta <= 1:
        raise ValueError(f"theta={theta}: expected a base > 1 (e.g. 10000)")
    return (float(theta) ** (-np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim)).astype(np.float32)


def rope_angles(positions: np.ndarray, rot_dim: int, theta: float) -> np.ndarray:
    """(T,) integer positions -> (T, rot_dim/2) fp32 angles fp32(fp32(pos) * inv_freq) (one product).

    The angle table is part of RoPE's definition: fp32 powers differ by an ulp between libraries, and
    one ulp of angle at position 4096 is more than the fp16 output rounding.
    """
    pos = np.asarray(positions)
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer) or (pos < 0).any():
        raise ValueError(f"positions: expected non-negative integers (T,), got {pos.dtype} {pos.shape}")
    if (pos >= 2**24).any():
        raise ValueError("positions: values >= 2^24 are not exact in fp32")
    return pos.astype(np.float32)[:, None] * rope_inv_freq(rot_dim, theta)[None, :]
