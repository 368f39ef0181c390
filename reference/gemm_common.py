"""The fp32 accumulation every reference GEMM shares, in one fixed order.

y[m, n] = fp16(acc + bias[n]) with acc an fp32 accumulator that starts at 0.0 and adds the fp32
product fl(x[m, k] * w[n, k]) for k = 0 .. K-1 ascending (no FMA contraction: numba does not enable
it without fastmath). The loops run m-tile -> n -> k -> m so that LLVM can vectorize across rows m;
each output still sees its own k-ascending chain, so the order above is exact, not approximate.
"""

from __future__ import annotations

import numpy as np
from numba import njit

M_TILE = 64  # rows of x per pass over the weight: a K x 64 fp32 tile of x^T stays in cache


@njit(cache=True)
def accumulate_row(xt: np.ndarray, wrow: np.ndarray, m0: int, m1: int, acc: np.ndarray) -> None:
    """acc[m - m0] = sum_k xt[k, m] * wrow[k] for m in [m0, m1), k ascending, fp32."""
    if m1 - m0 == 1:  # GEMV: the same chain in a scalar (register) accumulator
        total = np.float32(0.0)
        for k in range(wrow.size):
            total += xt[k, m0] * wrow[k]
        acc[0] = total
        return
    rows = m1 - m0
    tile = acc[:rows]
    tile[:] = np.float32(0.0)
    for k in range(wrow.size):
        wk = wrow[k]
        xrow = xt[k, m0:m1]  # contiguous slices: LLVM vectorizes this loop (7x, measured)
        for i in range(rows):
            tile[i] += xrow[i] * wk


@njit(cache=True)
def store_tile(out: np.ndarray, acc: np.ndarray, m0: int, m1: int, n: int, bias: np.ndarray) -> None:
    """out[m, n] = acc + bias[n] (one fp32 addition) for m in [m0, m1)."""
    for m in range(m0, m1):
        out[m, n] = acc[m - m0] + bias[n]


def prepare_x(x: np.ndarray, k: int) -> np.ndarray:
    """fp16 activations (M, K) -> fp32 x^T (K, M), contiguous (exact widening)."""
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32) or x.ndim != 2 or x.shape[1] != k:
        raise ValueError(f"x: expected float16 (M, {k}), got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x.T, dtype=np.float32)
