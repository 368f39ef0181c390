"""The one tolerance rule of mpsim: error bounds derived from reduction length and unit roundoff.

Every numerical test that checks a floating-point result (numba references, Triton kernels) compares
it with a float64 model (reference/exact.py) through ``assert_close_bound`` and a bound from this
module; docs/numerics.md derives each bound. Notation: u = 2^-24 (fp32 unit roundoff), u16 = 2^-11
(fp16), gamma_n = n*u / (1 - n*u) (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1):
n roundings in a product or sum chain give a relative error within gamma_n, in any order.

Every ``*_bound`` function returns the bound on |fp16 output - float64 model| for one fp32
computation rounded once to fp16 at the end. To compare two fp16 implementations with each other,
pass the sum of their two bounds (each is within its bound of the same float64 model). GPU tensor-core
accumulation may truncate instead of rounding: pass u=U32_TRUNC (2^-23) there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpsim.opspec import GELU_A, GELU_C

U32 = 2.0**-24  # fp32 unit roundoff (round to nearest)
U32_TRUNC = 2.0**-23  # an fp32 adder that truncates (some tensor-core accumulators)
U16 = 2.0**-11  # fp16 unit roundoff
U64 = 2.0**-53
FP16_HALF_SUBNORMAL = 2.0**-25  # half the fp16 subnormal spacing: the absolute rounding floor
# exp(a) in fp32: libm expf is within 1 ulp; CUDA's __expf (ex2.approx after a multiply by log2 e,
# what Triton's tl.exp lowers to) is within 2 + floor(|1.173 a|) ulp (CUDA C++ Programming Guide,
# "Intrinsic Functions"). One ulp is at most 2u relative, so: rel_err(exp(a)) <= 2u*(4 + 1.25|a|).
EXP_BASE_ULPS = 4.0
EXP_ARG_ULPS = 1.25
TRIG_ABS_ERR = 4 * U32  # |cos/sin error| in fp32 (libm and libdevice: within 2 ulp of values <= 1)
RSQRT_REL_ERR = 4 * U32  # rsqrt: 1/sqrt in two roundings, or rsqrt.approx (2^-22.9) on GPUs
TANH_ABS_ERR = 2.0**-21  # tanh via exp: (e - 1) / (e + 1) moves by at most rel_err(e) / 2


def gamma(n: int | np.ndarray, u: float = U32) -> np.ndarray:
    """gamma_n = n*u / (1 - n*u); an error if n*u >= 1 (no bound exists)."""
    nu = np.asarray(n, dtype=np.float64) * u
    if np.any(nu >= 1):
        raise ValueError(f"gamma: n*u = {float(np.max(nu))} >= 1, the bound does not exist")
    return nu / (1 - nu)


def exp_rel_err(a: np.ndarray, u: float = U32) -> np.ndarray:
    """Relative error allowed for fp32 exp(a) (see EXP_BASE_ULPS)."""
    return 2 * u * (EXP_BASE_ULPS + EXP_ARG_ULPS * np.abs(a))


def fp16_output_bound(abs_exact: np.ndarray, compute_bound: np.ndarray) -> np.ndarray:
    """Bound on |fp16(y_hat) - y| given |y_hat - y| <= compute_bound (y_hat the fp32 result).

    Rounding to fp16 moves y_hat by at most u16*|y_hat| (normal range) or 2^-25 (subnormal range),
    and |y_hat| <= |y| + compute_bound.
    """
    b = np.asarray(compute_bound, dtype=np.float64)
    return b * (1 + U16) + U16 * np.abs(abs_exact) + FP16_HALF_SUBNORMAL


def gemm_bound(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, u: float = U32) -> np.ndarray:
    """Bound for y = fp16(x @ w.T (+ bias)) with fp32 accumulation; x (M, K), w (N, K) -> (M, N).

    The bias adds one more term (and one rounding) to the sum: gamma_{K+1} (sum |x||w| + |b|).
    """
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    k = x64.shape[-1]
    mag = np.abs(x64) @ np.abs(w64).T
    exact = x64 @ w64.T
    if bias is not None:
        b64 = np.asarray(bias, np.float64)
        mag, exact = mag + np.abs(b64), exact + b64
    compute = (gamma(k + 1, u) + gamma(k + 1, U64)) * mag
    return fp16_output_bound(exact, compute)


def gemv_partial_bound(x: np.ndarray, w_hat: np.ndarray, scale: np.ndarray, bits: int, trips: int,
                       bias: np.ndarray | None = None, u: float = U32) -> np.ndarray:
    """Bound for the one-row group GEMV with fp16 partial sums (kernels/gemv_group.py, the twin
    reference/gemv_group.py) against the float64 x @ w_hat.T (+ bias); docs/numerics.md.

    x (M, K); w_hat (N, K) the exact dequantized weights; scale (N, K) each weight's group scale s.
    The kernel sums v = (q - z) s unrounded (|v| <= (|w_hat| + 2^-25) / (1 - u16)): per weight
    u16|v| + 2^-25 for w_hat's own rounding; T fp16 partial sums of x (q - z) 2^-E, two roundings per
    term (product, add): gamma_2T(u16) |x||v| + 2 * 2^-25 * 2^E |s| per weight (subnormal floor,
    scaled back by s 2^E); then fp32 (the multiply by s 2^E and every sum after it): gamma_{K+2}.
    """
    x64, w64 = np.asarray(x, np.float64), np.asarray(w_hat, np.float64)
    s64 = np.abs(np.asarray(scale, np.float64))
    k = x64.shape[-1]
    e = (trips * ((1 << bits) - 1) - 1).bit_length()
    ax = np.abs(x64)
    v = (np.abs(w64) + FP16_HALF_SUBNORMAL) / (1 - U16)
    mag_v = ax @ v.T
    g16 = float(gamma(2 * trips, U16))
    e_hat = U16 * mag_v + FP16_HALF_SUBNORMAL * ax.sum(axis=-1, keepdims=True)
    e_partial = g16 * mag_v + np.ones_like(ax) @ (2 * FP16_HALF_SUBNORMAL * 2.0**e * (1 + g16) * s64).T
    g32 = float(gamma(k + 2, u))
    mag, exact = ax @ np.abs(w64).T, x64 @ w64.T
    b_mag: float | np.ndarray = 0.0
    if bias is not None:
        b64 = np.asarray(bias, np.float64)
        b_mag, exact, mag = np.abs(b64), exact + b64, mag + np.abs(b64)
    compute = e_hat + (1 + g32) * e_partial + g32 * (mag_v + e_partial + b_mag)
    return fp16_output_bound(exact, compute + gamma(k + 1, U64) * mag)


def gemv_pair_partial_bound(x: np.ndarray, w_hat: np.ndarray, e: int, trips: int,
                            bias: np.ndarray | None = None, u: float = U32) -> np.ndarray:
    """Bound for the one-row any-precision GEMV with fp16 partial sums (kernels/gemv_anyprec.py, the
    twin reference/gemm_anyprec.py::gemv_anyprec_partial_ref) against the float64 x @ w_hat.T
    (+ bias); docs/numerics.md. w_hat (N, K) the exact fp16 LUT values, e the x scale's exponent.

    In the scaled domain (a = 2^-e) each term of a run carries x' = fp16(a x) (u16 a|x| + 2^-25),
    its fp16 product and the run's fp16 adds: gamma_{2T+1}(u16) a|x||w| + 2^-25 (1 + gamma_2T)
    (|w| + 2) per weight, times 2^e once the sum is scaled back (exact); then fp32: gamma_{K+2}.
    """
    x64, w64 = np.asarray(x, np.float64), np.asarray(w_hat, np.float64)
    k = x64.shape[-1]
    ax, aw = np.abs(x64), np.abs(w64)
    mag, exact = ax @ aw.T, x64 @ w64.T
    g16 = float(gamma(2 * trips, U16))
    floor = FP16_HALF_SUBNORMAL * 2.0**e * (1 + g16) * (aw + 2).sum(axis=-1)
    e_partial = float(gamma(2 * trips + 1, U16)) * mag + floor[None, :]
    g32 = float(gamma(k + 2, u))
    b_mag: float | np.ndarray = 0.0
    if bias is not None:
        b64 = np.asarray(bias, np.float64)
        b_mag, exact, mag = np.abs(b64), exact + b64, mag + np.abs(b64)
    compute = (1 + g32) * e_partial + g32 * (mag + e_partial + b_mag)
    return fp16_output_bound(exact, compute + gamma(k + 1, U64) * mag)


@dataclass(frozen=True)
class FoldedMagnitudes:
    """What the folded decode sums' rounding errors scale with (folded_magnitudes); None: that
    operand is fp16 (not folded), its usual magnitudes apply."""

    score_mag: np.ndarray | None  # (..., Tq, Tk): s_j sum_d |q_d| c_jd + |z_j| sum_d |q_d|
    v_mag: np.ndarray | None      # (..., Tk, D): s_j c_jd + |z_j|
    codes_v: np.ndarray | None    # (..., Tk, D): c_jd of V


def folded_magnitudes(q: np.ndarray,
                      k_parts: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                      v_parts: tuple[np.ndarray, np.ndarray, np.ndarray] | None
                      ) -> FoldedMagnitudes:
    """q (..., Tq, D); parts = (codes (..., Tk, D), scale (..., Tk), zero (..., Tk)) of a quantized
    K or V (x = c s + z exactly, float64), None for an fp16 one."""
    aq = np.abs(np.asarray(q, np.float64))
    score = v_mag = codes_v = None
    if k_parts is not None:
        kc, ks, kz = (np.asarray(a, np.float64) for a in k_parts)
        score = (aq @ np.swapaxes(kc, -1, -2)) * ks[..., None, :] \
            + aq.sum(axis=-1, keepdims=True) * np.abs(kz)[..., None, :]
    if v_parts is not None:
        codes_v, vs, vz = (np.asarray(a, np.float64) for a in v_parts)
        v_mag = codes_v * vs[..., None] + np.abs(vz)[..., None]
    return FoldedMagnitudes(score, v_mag, codes_v)


def _score_error(q64: np.ndarray, k64: np.ndarray, sm_scale: float, u: float,
                 folded: FoldedMagnitudes | None) -> np.ndarray:
    """Scores' error: D products + sum, the scale multiply, a folded log2(e) constant: gamma_{D+2};
    folded: s (q . c) + z sum(q), two more roundings on magnitudes s |q|.c + |z| sum|q|."""
    d = q64.shape[-1]
    if folded is None or folded.score_mag is None:
        return gamma(d + 2, u) * abs(sm_scale) * (np.abs(q64) @ np.swapaxes(np.abs(k64), -1, -2))
    return gamma(d + 4, u) * abs(sm_scale) * folded.score_mag


def attention_bound(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    sm_scale: float,
    mask: np.ndarray,
    p_fp16: bool = False,
    n_rescales: int = 0,
    u: float = U32,
    folded: FoldedMagnitudes | None = None,
) -> np.ndarray:
    """Bound for o = fp16(softmax(sm_scale * q k^T, masked) v) computed in fp32; docs/numerics.md.

    q (..., Tq, D), k and v (..., Tk, D) (heads already matched), mask (..., Tq, Tk) bool, True =
    attended (every row needs at least one). p_fp16: the probabilities are rounded to fp16 before the
    P @ V product (flash-attention kernels). n_rescales: how many online-softmax rescalings a running
    sum may see (0 for the two-pass reference). folded: the scale/zero-folded sums of quantized K/V
    (kernels/kv_fold.py), whose rounding errors scale with other magnitudes (folded_magnitudes).
    """
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    d, tk = q64.shape[-1], k64.shape[-2]
    s = sm_scale * (q64 @ np.swapaxes(k64, -1, -2))
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    p /= p.sum(axis=-1, keepdims=True)
    a = np.where(mask, s - m, 0.0)
    delta = np.where(mask, _score_error(q64, k64, sm_scale, u, folded), 0.0)
    dmax = delta.max(axis=-1, keepdims=True)
    arg_err = delta + dmax + u * (np.abs(a) + delta + dmax)
    srange = np.abs(a).max(axis=-1, keepdims=True)
    resc = ((1 + exp_rel_err(srange, u)) * np.exp(u * srange)) ** n_rescales
    rho = np.where(mask, np.exp(arg_err) * (1 + exp_rel_err(a, u)) * resc - 1, 0.0)
    rho_bar = (p * rho).sum(axis=-1, keepdims=True)
    if np.any(rho_bar >= 1):
        raise ValueError("attention_bound: score errors too large for a first-order bound")
    abs_v = np.abs(v64)
    pv = p @ abs_v  # sum_j p_j |v_j|
    prv = (p * rho) @ abs_v  # sum_j p_j rho_j |v_j|
    weights_err = (prv + rho_bar * pv) / (1 - rho_bar)
    # folded: fl(p s) c summed, fl(p z) summed apart, the two sums added: two more roundings per
    # term, on the magnitudes s c + |z| (>= |v|); fp16(p s) (the tl.dot path) rounds with absolute
    # error 2^-25 times c
    v_folded = folded is not None and folded.v_mag is not None
    g_num = gamma(tk + 2 * n_rescales + 1 + 2 * v_folded, u)
    if p_fp16:
        g_num = (1 + g_num) * (1 + U16) - 1
    g_div = gamma(tk + 2 * n_rescales + 2, u)
    mag_v, sub_v = abs_v, abs_v
    if folded is not None and folded.v_mag is not None and folded.codes_v is not None:
        mag_v, sub_v = folded.v_mag, folded.codes_v
    scaled = (p @ mag_v + (p * rho) @ mag_v) / (1 - rho_bar)
    compute = weights_err + (g_num * (1 + g_div) + g_div) * scaled
    if p_fp16:  # p below 2^-14 rounds with absolute error 2^-25; the softmax sum is >= 1
        compute = compute + FP16_HALF_SUBNORMAL * np.where(mask, 1.0, 0.0) @ sub_v
    compute = compute + gamma(d + tk + 16, U64) * 4 * pv  # the float64 model's own error
    o = p @ v64
    return fp16_output_bound(o, compute)


def rms_norm_bound(x: np.ndarray, weight: np.ndarray, eps: float, u: float = U32) -> np.ndarray:
    """Bound for y = fp16(x * rsqrt(mean(x^2) + eps) * w) over the last axis, fp32.

    sum of D squares, /D and +eps: relative gamma_{D+2} on the mean square (all terms >= 0); through
    1/sqrt at most that again, plus the rsqrt's own error; two products: gamma_2.
    """
    x64, w64 = np.asarray(x, np.float64), np.asarray(weight, np.float64)
    d = x64.shape[-1]
    eps32 = float(np.float32(eps))
    r = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps32)
    y = x64 * r * w64
    rel = (1 + gamma(d + 2, u)) * (1 + RSQRT_REL_ERR) * (1 + gamma(2, u)) - 1
    return fp16_output_bound(y, rel * np.abs(y) + gamma(d + 8, U64) * np.abs(y))


def layer_norm_bound(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float, u: float = U32
) -> np.ndarray:
    """Bound for y = fp16((x - mean) * rsqrt(var + eps) * w + b), two-pass mean/variance in fp32."""
    x64, w64, b64 = (np.asarray(a, np.float64) for a in (x, weight, bias))
    d = x64.shape[-1]
    eps32 = float(np.float32(eps))
    mu = x64.mean(axis=-1, keepdims=True)
    c = x64 - mu
    var = np.mean(c * c, axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(var + eps32)
    e_mu = gamma(d + 1, u) * np.abs(x64).mean(axis=-1, keepdims=True)
    e_c = e_mu + u * (np.abs(c) + e_mu)  # error of each centred value
    e_sq = (2 * np.abs(c) * e_c + e_c * e_c).mean(axis=-1, keepdims=True)
    e_var = e_sq * (1 + gamma(d + 2, u)) + gamma(d + 2, u) * var
    phi = e_var / (var + eps32) * (1 + u) + u
    if np.any(phi >= 1):
        raise ValueError("layer_norm_bound: variance error too large for a bound (var + eps ~ 0)")
    rho_r = (1 - phi) ** -0.5 * (1 + RSQRT_REL_ERR) - 1
    y = c * r * w64 + b64
    prod = np.abs(w64) * r * (e_c * (1 + rho_r) + np.abs(c) * rho_r)
    compute = prod * (1 + gamma(3, u)) + gamma(3, u) * (np.abs(c * r * w64) + np.abs(y))
    return fp16_output_bound(y, compute + gamma(2 * d + 8, U64) * (np.abs(c * r * w64) + np.abs(y)))


def silu_mul_bound(gate: np.ndarray, up: np.ndarray, u: float = U32) -> np.ndarray:
    """Bound for y = fp16(gate / (1 + exp(-gate)) * up) in fp32.

    exp(-g) within eta relative (its own error, with an argument error of 2u|g| for exp2-based
    versions) moves 1/(1 + e) by at most eta relative; then 1 + e, the division and the product:
    gamma_3.
    """
    g64, u64 = np.asarray(gate, np.float64), np.asarray(up, np.float64)
    y = g64 / (1 + np.exp(-g64)) * u64
    eta = np.exp(2 * u * np.abs(g64)) * (1 + exp_rel_err(g64, u)) - 1
    rel = (1 + gamma(3, u)) * (1 + eta / (1 - eta)) - 1
    return fp16_output_bound(y, rel * np.abs(y) + gamma(8, U64) * np.abs(y))


def gelu_bound(x: np.ndarray, u: float = U32) -> np.ndarray:
    """Bound for y = fp16(0.5 x (1 + tanh(c (x + a x^3)))) in fp32 (c, a: fp32 constants).

    The tanh argument has relative error gamma_5 (x^3: 2 roundings, times a, plus x, times c; x and
    a x^3 share a sign, so no cancellation); tanh moves by sech^2 at most over that interval, plus its
    own error; 1 + t and the product with 0.5 x: gamma_2.
    """
    x64 = np.asarray(x, np.float64)
    arg = GELU_C * (x64 + GELU_A * x64**3)
    t = np.tanh(arg)
    y = 0.5 * x64 * (1 + t)
    d_arg = gamma(5, u) * np.abs(arg)
    e2 = np.exp(-2 * np.maximum(np.abs(arg) - d_arg, 0.0))
    slope = 4 * e2 / (1 + e2) ** 2  # sech^2, without overflow
    d_t = slope * d_arg + 4 * u * np.abs(t) + TANH_ABS_ERR
    compute = 0.5 * np.abs(x64) * d_t * (1 + gamma(2, u)) + gamma(2, u) * np.abs(y)
    return fp16_output_bound(y, compute + gamma(8, U64) * (np.abs(y) + np.abs(x64)))


def rope_bound(x_rot: np.ndarray, cos: np.ndarray, sin: np.ndarray, u: float = U32) -> np.ndarray:
    """Bound for the rotated half-pairs of RoPE, x_rot (..., R) with cos/sin (..., R/2) in float64.

    out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin: cos/sin each within TRIG_ABS_ERR, two products
    and one sum: gamma_2. The angle itself is part of the op's definition (reference/rope.py).
    """
    x64 = np.asarray(x_rot, np.float64)
    h = x64.shape[-1] // 2
    x1, x2 = x64[..., :h], x64[..., h:]
    c, s = np.asarray(cos, np.float64), np.asarray(sin, np.float64)
    mag = np.concatenate([np.abs(x1 * c) + np.abs(x2 * s), np.abs(x2 * c) + np.abs(x1 * s)], -1)
    trig = TRIG_ABS_ERR * (np.abs(x1) + np.abs(x2))
    trig = np.concatenate([trig, trig], -1)
    y = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    compute = trig * (1 + gamma(2, u)) + gamma(2, u) * mag + gamma(4, U64) * mag
    return fp16_output_bound(y, compute)


def assert_close_bound(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str) -> None:
    """Assert |actual - expected| <= bound elementwise (float64); the message names the worst element."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    b = np.broadcast_to(np.asarray(bound, np.float64), e.shape)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} != expected {e.shape}")
    err = np.abs(a - e)
    bad = ~(err <= b)  # nan anywhere is a failure
    if bad.any():
        ratio = np.where(bad, np.nan_to_num(err / np.maximum(b, 1e-300), nan=np.inf), 0.0)
        i = tuple(int(j) for j in np.unravel_index(int(np.argmax(ratio)), e.shape))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {e.size} elements outside the bound; worst at {i}: "
            f"got {float(a[i])!r}, expected {float(e[i])!r}, |diff| {float(err[i]):.3e} > "
            f"bound {float(b[i]):.3e}"
        )
