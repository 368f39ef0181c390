"""Reference RMSNorm and LayerNorm over the last axis: fp32 arithmetic, one rounding to fp16.

RMSNorm, per row of D values (d ascending, one fp32 accumulator):
    ss = sum_d x_d^2;  r = 1 / sqrt(ss / D + eps);  y_d = fp16((x_d * r) * w_d)
LayerNorm, two passes (d ascending, one fp32 accumulator each):
    mu = (sum_d x_d) / D;  c_d = x_d - mu;  var = (sum_d c_d^2) / D;  r = 1 / sqrt(var + eps)
    y_d = fp16(((c_d * r) * w_d) + b_d)
eps is used as its fp32 value.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp16 import widen


@njit(cache=True)
def rms_norm_f32(x: np.ndarray, w: np.ndarray, eps: np.float32) -> np.ndarray:
    """x (R, D), w (D,) fp32 -> (R, D) fp32."""
    rows, d = x.shape
    out = np.empty_like(x)
    for r in range(rows):
        ss = np.float32(0.0)
        for i in range(d):
            ss += x[r, i] * x[r, i]
        inv = np.float32(1.0) / np.sqrt(ss / np.float32(d) + eps)
        for i in range(d):
            out[r, i] = (x[r, i] * inv) * w[i]
    return out


@njit(cache=True)
def layer_norm_f32(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: np.float32) -> np.ndarray:
    """x (R, D), w and b (D,) fp32 -> (R, D) fp32."""
    rows, d = x.shape
    out = np.empty_like(x)
    c = np.empty(d, dtype=np.float32)
    for r in range(rows):
        total = np.float32(0.0)
        for i in range(d):
            total += x[r, i]
        mu = total / np.float32(d)
        sq = np.float32(0.0)
        for i in range(d):
            c[i] = x[r, i] - mu
            sq += c[i] * c[i]
        inv = np.float32(1.0) / np.sqrt(sq / np.float32(d) + eps)
        for i in range(d):
            out[r, i] = ((c[i] * inv) * w[i]) + b[i]
    return out


def _rows(x: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x32 = widen(x, "x")
    if x32.ndim < 1:
        raise ValueError("x: expected at least one dimension (the normalized one)")
    w32 = widen(weight, "weight", 1)
    if w32.shape[0] != x32.shape[-1]:
        raise ValueError(f"weight: expected length {x32.shape[-1]}, got {w32.shape[0]}")
    return x32.reshape(-1, x32.shape[-1]), w32


def rms_norm_ref(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """fp16 x [..., D], fp16 weight (D,) -> fp16 [..., D]."""
    x2, w32 = _rows(x, weight)
    return rms_norm_f32(x2, w32, np.float32(eps)).reshape(np.shape(x)).astype(np.float16)


def layer_norm_ref(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """fp16 x [..., D], fp16 weight and bias (D,) -> fp16 [..., D]."""
    x2, w32 = _rows(x, weight)
    b32 = widen(bias, "bias", 1)
    if b32.shape != w32.shape:
        raise ValueError(f"bias: expected length {w32.shape[0]}, got {b32.shape[0]}")
    out = layer_norm_f32(x2, w32, b32, np.float32(eps))
    return out.reshape(np.shape(x)).astype(np.float16)
