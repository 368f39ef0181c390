"""Error bounds of the fp8 / fp4 kernels (issue 26 point 3), on reference/tolerance.py's rule.

Notation as there: u the accumulator's unit roundoff (U32; pass a larger one for a GPU accumulator
that keeps fewer bits), gamma_n = n u / (1 - n u). Each bound is on |fp16 output - float64 model|,
the model computed from the exact code values and scales (the quantizers' outputs, which the exact
tests pin bit for bit); the model's own float64 rounding adds gamma_{K+1}(U64) of the magnitudes.
"""

from __future__ import annotations

import numpy as np

from mpsim.reference.tolerance import U32, U64, fp16_output_bound, gamma


def _with_bias(exact: np.ndarray, mag: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if bias is None:
        return exact, mag
    b64 = np.asarray(bias, np.float64)
    return exact + b64, mag + np.abs(b64)


def scaled_gemm_bound(a_hat: np.ndarray, w_hat: np.ndarray, bias: np.ndarray | None = None,
                      u: float = U32) -> np.ndarray:
    """A GEMM on exact scaled operands a_hat (M, K), w_hat (N, K) (code values times their scales,
    float64) whose every product term is exact in fp32 and passes at most K - 1 additions (any
    order and grouping: the K tiles, the splits; adds into a zeroed accumulator are exact), two
    roundings of its scale (fl(sw sa), then the product; or fl(acc sw) then fl(. sa)) and the bias
    add: K + 2 roundings, within gamma_{K+3} (sum_k |a_hat w_hat| + |b|) before the fp16 rounding."""
    a64, w64 = np.asarray(a_hat, np.float64), np.asarray(w_hat, np.float64)
    k = a64.shape[-1]
    exact, mag = _with_bias(a64 @ w64.T, np.abs(a64) @ np.abs(w64).T, bias)
    return fp16_output_bound(exact, gamma(k + 3, u) * mag + gamma(k + 1, U64) * mag)


def w8a8_bound(a_vals: np.ndarray, a_scales: np.ndarray, w_vals: np.ndarray, w_scales: np.ndarray,
               bias: np.ndarray | None = None, u: float = U32) -> np.ndarray:
    """W8A8 GEMM (kernels/gemm_fp8.py, reference/gemm_fp8.py): y = fl(fl(acc sw) sa) + b, acc the fp32
    sum of the exact code products. a_vals (M, K), w_vals (N, K) the decoded e4m3 values, a_scales
    (M,), w_scales (1,) or (N,). Every product term passes at most K additions (any order, the add
    into the zeroed accumulator and the split-K sums included), the two scale products and the bias
    add: K + 3 roundings, so |error| <= gamma_{K+3} (sum_k |a_k w_k| sa sw + |b|) before the fp16
    rounding."""
    a64 = np.asarray(a_vals, np.float64) * np.asarray(a_scales, np.float64)[:, None]
    w64 = np.asarray(w_vals, np.float64) * np.asarray(w_scales, np.float64)[:, None]
    return scaled_gemm_bound(a64, w64, bias, u)


def fp4_gemv_bound(x: np.ndarray, w_unscaled: np.ndarray, global_scale: float,
                   bias: np.ndarray | None = None, u: float = U32) -> np.ndarray:
    """FP4 weight-only GEMV (kernels/gemv_fp4.py, reference/gemv_fp4.py): y = fl(acc g) + b, acc the
    fp32 sum over k of x_k v_k, v = e2m1(q) S_b (exact in fp32 and in fp16: at most 5 significant
    bits, a multiple of 2^-10), g the per-tensor scale (1 for MXFP4, whose power-of-two block scale
    is inside v). Each term: its product x_k v_k (one rounding), at most K additions, the product by
    g, the bias add: gamma_{K+3}(sum |x v| g + |b|). The model is x @ (v g).T + b in float64, so the
    reference's dequantized x_hat = fl(v g) differs from v g by at most u |v g| per weight: that
    difference is the test's to add when it compares against x @ x_hat.T."""
    x64 = np.asarray(x, np.float64)
    w64 = np.asarray(w_unscaled, np.float64) * float(global_scale)
    k = x64.shape[-1]
    exact, mag = _with_bias(x64 @ w64.T, np.abs(x64) @ np.abs(w64).T, bias)
    return fp16_output_bound(exact, gamma(k + 3, u) * mag + gamma(k + 1, U64) * mag)
