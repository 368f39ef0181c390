"""Reference twin of the one-row group GEMV with fp16 partial sums (kernels/gemv_group.py).

y[n] = fp16(sum over lanes l of acc_l + bias[n]), where lane l (0 <= l < L, L the kernel's BLOCK_K)
walks the K runs of T tiles (T*L columns, inside one group g) in order:
    p = fp16(0); for t < T: k = run + t*L + l; p = fp16(p + fp16(x[k] * d[k]))
    acc_l = fp32(acc_l + fp32(fp32(p) * s_g 2^E))
with d[k] = (q[k] - z_g) 2^-E exact and E = ceil(log2(T (2^b - 1))), so |p| <= 65504 for any finite
fp16 x. Lanes are summed l ascending in fp32, then the bias is added. The kernel computes the same
fp16 partial sums lane by lane (on a GPU each step is one fused HFMA2, one rounding instead of two;
the interpreter rounds twice, as here) and sums the fp32 lanes and K splits in its own order; both
are within reference/tolerance.py::gemv_partial_bound of the float64 model (docs/numerics.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp16 import round_fp16, to_fp16, widen_bias
from mpsim.reference.packing import check_bits, unpack_codes


def partial_exp(bits: int, trips: int) -> int:
    """E = ceil(log2(trips * (2^bits - 1))), the power of two the partial sums are scaled down by."""
    return (trips * ((1 << bits) - 1) - 1).bit_length()


@njit(cache=True)
def gemv_partial_f32(x: np.ndarray, codes: np.ndarray, scales: np.ndarray, zeros: np.ndarray,
                     group: int, lanes: int, trips: int, e: int, bias: np.ndarray) -> np.ndarray:
    """x fp32 (Kp,) zero past K, codes (N, Kp), scales/zeros fp32 (N, Kp/G) -> fp32 (N,)."""
    n_total, kp = codes.shape
    out = np.empty(n_total, dtype=np.float32)
    acc = np.empty(lanes, dtype=np.float32)
    down = np.float32(2.0 ** -e)
    up = np.float32(2.0 ** e)
    run = lanes * trips
    for n in range(n_total):
        acc[:] = np.float32(0.0)
        for r0 in range(0, kp, run):
            g = r0 // group
            z, s_up = zeros[n, g], scales[n, g] * up
            for lane in range(lanes):
                p = np.float32(0.0)
                for t in range(trips):
                    k = r0 + t * lanes + lane
                    d = (np.float32(codes[n, k]) - z) * down  # exact
                    p = round_fp16(p + round_fp16(x[k] * d))
                acc[lane] = acc[lane] + p * s_up
        total = np.float32(0.0)
        for lane in range(lanes):
            total += acc[lane]
        out[n] = total + bias[n]
    return out


def gemv_group_partial_ref(x: np.ndarray, qweight: np.ndarray, scales: np.ndarray,
                           zeros: np.ndarray, bits: int, group_size: int, k: int, lanes: int,
                           trips: int, bias: np.ndarray | None = None) -> np.ndarray:
    """fp16 x (1, k) @ the group weight's W.T (+ bias) -> fp16 (1, N), in the partial-sum order
    above: `lanes` = the kernel's BLOCK_K, `trips` = its T (lanes * trips must divide the group)."""
    check_bits(bits)
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32) or x.shape != (1, k):
        raise ValueError(f"x: expected float16 (1, {k}), got {x.dtype} {x.shape}")
    if lanes < 1 or trips < 1 or group_size % (lanes * trips):
        raise ValueError(f"lanes={lanes} x trips={trips} must divide group_size={group_size}")
    codes = unpack_codes(qweight, bits, qweight.shape[1] * 32 // bits)
    n, kp = codes.shape
    if scales.shape != (n, kp // group_size) or zeros.shape != scales.shape or k > kp:
        raise ValueError(f"scales {scales.shape} / zeros {zeros.shape} do not match qweight "
                         f"{qweight.shape} with bits={bits}, group_size={group_size}, k={k}")
    xp = np.zeros(kp, dtype=np.float32)
    xp[:k] = x[0]
    b32, _ = widen_bias(bias, n)
    out = gemv_partial_f32(xp, codes, np.ascontiguousarray(scales, dtype=np.float32),
                           np.ascontiguousarray(zeros, dtype=np.float32), group_size, lanes, trips,
                           partial_exp(bits, trips), b32)
    return to_fp16(out)[None, :]
