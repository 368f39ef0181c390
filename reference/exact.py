"""Float64 models of every reference op: what the fp32 references approximate, for the bound tests.

Each takes the fp16 inputs (or their exact fp32/float64 values) and computes in float64 with numpy.
The constants that define an op (GELU's, eps rounded to fp32, the RoPE angle table) are the ones the
fp32 code uses, so the model and the code differ only by rounding. reference/tolerance.py bounds
that difference.
"""

from __future__ import annotations

import numpy as np

from mpsim.opspec import GELU_A, GELU_C


def gemm_float64(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """x (M, K) @ w (N, K).T (+ bias) in float64."""
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T
    return y if bias is None else y + np.asarray(bias, np.float64)


def causal_mask(tq: int, tk: int) -> np.ndarray:
    """(tq, tk) bool: query i (the last tq of tk positions) sees keys 0 .. tk - tq + i."""
    return np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)


def expand_kv_heads(kv: np.ndarray, num_q_heads: int, head_axis: int) -> np.ndarray:
    """Repeat each KV head for its group of query heads (GQA): Hkv -> Hq along head_axis."""
    hkv = kv.shape[head_axis]
    if num_q_heads % hkv:
        raise ValueError(f"GQA: {num_q_heads} query heads is not a multiple of {hkv} KV heads")
    return np.repeat(kv, num_q_heads // hkv, axis=head_axis)


def attention_float64(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, sm_scale: float, mask: np.ndarray
) -> np.ndarray:
    """softmax(sm_scale q k^T, masked) v in float64; q (..., Tq, D), k, v (..., Tk, D)."""
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    s = np.where(mask, sm_scale * (q64 @ np.swapaxes(k64, -1, -2)), -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v64


def rms_norm_float64(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    x64 = np.asarray(x, np.float64)
    ms = np.mean(x64 * x64, axis=-1, keepdims=True)
    return x64 / np.sqrt(ms + float(np.float32(eps))) * np.asarray(weight, np.float64)


def layer_norm_float64(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    x64 = np.asarray(x, np.float64)
    c = x64 - x64.mean(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + float(np.float32(eps)))
    return c * r * np.asarray(weight, np.float64) + np.asarray(bias, np.float64)


def silu_mul_float64(gate_up: np.ndarray) -> np.ndarray:
    """(M, 2F): silu(first half) * second half."""
    g64 = np.asarray(gate_up, np.float64)
    f = g64.shape[-1] // 2
    g, up = g64[..., :f], g64[..., f:]
    return g / (1 + np.exp(-g)) * up


def gelu_float64(x: np.ndarray) -> np.ndarray:
    x64 = np.asarray(x, np.float64)
    return 0.5 * x64 * (1 + np.tanh(GELU_C * (x64 + GELU_A * x64**3)))


def rope_float64(x: np.ndarray, angles: np.ndarray, rot_dim: int) -> np.ndarray:
    """x (T, H, D), angles (T, rot_dim/2) (the op's fp32 angles): rotate-half on the first rot_dim."""
    x64 = np.asarray(x, np.float64).copy()
    h = rot_dim // 2
    c = np.cos(np.asarray(angles, np.float64))[:, None, :]
    s = np.sin(np.asarray(angles, np.float64))[:, None, :]
    x1, x2 = x64[..., :h].copy(), x64[..., h:rot_dim].copy()
    x64[..., :h] = x1 * c - x2 * s
    x64[..., h:rot_dim] = x2 * c + x1 * s
    return x64
