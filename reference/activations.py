"""Reference activations: SiLU-and-multiply (SwiGLU) and GELU (tanh approximation, "gelu_new").

Elementwise in fp32, one rounding to fp16:
    silu_mul: y = fp16((g / (1 + exp(-g))) * u)     g = gate_up[..., :F], u = gate_up[..., F:]
    gelu:     y = fp16((0.5 * x) * (1 + tanh(c * (x + a * ((x * x) * x)))))
with c = fp32(sqrt(2/pi)) and a = fp32(0.044715) (mpsim/opspec.py holds both).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.opspec import GELU_A, GELU_C
from mpsim.reference.fp16 import widen

_C = np.float32(GELU_C)
_A = np.float32(GELU_A)


@njit(cache=True)
def silu_mul_f32(gu: np.ndarray) -> np.ndarray:
    """gu (R, 2F) fp32 -> (R, F) fp32."""
    rows, two_f = gu.shape
    f = two_f // 2
    out = np.empty((rows, f), dtype=np.float32)
    one = np.float32(1.0)
    for r in range(rows):
        for i in range(f):
            g = gu[r, i]
            out[r, i] = (g / (one + np.exp(-g))) * gu[r, f + i]
    return out


@njit(cache=True)
def gelu_f32(x: np.ndarray, c: np.float32, a: np.float32) -> np.ndarray:
    """x (n,) fp32 -> (n,) fp32."""
    out = np.empty_like(x)
    half, one = np.float32(0.5), np.float32(1.0)
    for i in range(x.size):
        v = x[i]
        inner = c * (v + a * ((v * v) * v))
        out[i] = (half * v) * (one + np.tanh(inner))
    return out


def silu_mul_ref(gate_up: np.ndarray) -> np.ndarray:
    """fp16 (M, 2F): first half gate, second half up -> fp16 (M, F)."""
    gu = widen(gate_up, "gate_up", 2)
    if gu.shape[1] % 2:
        raise ValueError(f"gate_up: expected an even last dimension (gate | up), got {gu.shape[1]}")
    return silu_mul_f32(gu).astype(np.float16)


def gelu_ref(x: np.ndarray) -> np.ndarray:
    """fp16 x (any shape) -> fp16, tanh-approximated GELU."""
    x32 = widen(x, "x")
    return gelu_f32(x32.ravel(), _C, _A).reshape(x32.shape).astype(np.float16)
