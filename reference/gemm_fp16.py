"""Reference fp16 GEMM/GEMV: y = x @ W.T (+ bias), fp32 accumulation, one rounding to fp16.

Summation order (reference/gemm_common.py): per output one fp32 accumulator, k ascending, then
+ bias[n] in fp32, then round to fp16 (nearest even).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp16 import to_fp16, widen, widen_bias
from mpsim.reference.gemm_common import M_TILE, accumulate_row, prepare_x, store_tile


@njit(cache=True)
def gemm_f32(xt: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """xt (K, M) fp32, w (N, K) fp32 holding fp16 values, bias (N,) -> (M, N) fp32."""
    m_total = xt.shape[1]
    out = np.empty((m_total, w.shape[0]), dtype=np.float32)
    acc = np.empty(M_TILE, dtype=np.float32)
    for m0 in range(0, m_total, M_TILE):
        m1 = min(m0 + M_TILE, m_total)
        for n in range(w.shape[0]):
            accumulate_row(xt, w[n], m0, m1, acc)
            store_tile(out, acc, m0, m1, n, bias)
    return out


def gemm_fp16_ref(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """fp16 x (M, K), fp16 w (N, K), optional fp16 bias (N,) -> fp16 y (M, N)."""
    w32 = widen(w, "w", 2)
    xt = prepare_x(x, w32.shape[1])
    b32, _ = widen_bias(bias, w32.shape[0])
    return to_fp16(gemm_f32(xt, w32, b32))
