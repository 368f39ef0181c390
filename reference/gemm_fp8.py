"""Reference (numba) FP8 W8A8 GEMM on e4m3 codes: the twin of kernels/gemm_fp8.py.

y[m, n] = fp16(fl(fl(acc * sw[n]) * sa[m]) + b[n]) with acc = sum_k e4m3(qa[m, k]) e4m3(qw[n, k]) in
fp32, k ascending (each product of two e4m3 values is exact in fp32: 4-bit significands). sw is one
fp32 weight scale per tensor (shape (1,)) or per output row ((N,)); sa one per token (M,), as
reference/fp8_quant.py's quantize_fp8 / quantize_fp8_tokens produce them. The bound against the
float64 model (reference/tolerance_fp.py::w8a8_bound) holds for the twin and the kernel alike.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp8 import decode_e4m3
from mpsim.reference.fp16 import to_fp16, widen_bias


@njit(cache=True)
def _w8a8(a: np.ndarray, sa: np.ndarray, w: np.ndarray, sw: np.ndarray, b: np.ndarray) -> np.ndarray:
    m_total, k_total = a.shape
    n_total = w.shape[0]
    out = np.empty((m_total, n_total), dtype=np.float32)
    for m in range(m_total):
        for n in range(n_total):
            acc = np.float32(0.0)
            for k in range(k_total):
                acc += a[m, k] * w[n, k]
            t = np.float32(acc * sw[n if sw.size > 1 else 0])
            t = np.float32(t * sa[m])
            out[m, n] = np.float32(t + b[n])
    return out


def w8a8_scales(sa: np.ndarray, sw: np.ndarray, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Check the scale vectors: sa float32 (M,), sw float32 (1,) or (N,)."""
    sa, sw = np.asarray(sa), np.asarray(sw)
    if sa.dtype != np.float32 or sa.shape != (m,):
        raise ValueError(f"a_scales: expected float32 ({m},), got {sa.dtype} {sa.shape}")
    if sw.dtype != np.float32 or sw.shape not in ((1,), (n,)):
        raise ValueError(f"w_scales: expected float32 (1,) or ({n},), got {sw.dtype} {sw.shape}")
    return sa, sw


def gemm_fp8_ref(a_codes: np.ndarray, a_scales: np.ndarray, w_codes: np.ndarray,
                 w_scales: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """uint8 e4m3 codes a (M, K), w (N, K); fp32 scales (M,), (1,) or (N,); fp16 bias (N,) -> fp16."""
    a, w = decode_e4m3(a_codes), decode_e4m3(w_codes)
    if a.ndim != 2 or w.ndim != 2 or a.shape[1] != w.shape[1]:
        raise ValueError(f"codes: expected a (M, K) and w (N, K), got {a.shape} and {w.shape}")
    sa, sw = w8a8_scales(a_scales, w_scales, a.shape[0], w.shape[0])
    b, _ = widen_bias(bias, w.shape[0])
    return to_fp16(_w8a8(a, sa, w, sw, b))


@njit(cache=True)
def _w8a8_blocks(a: np.ndarray, sa: np.ndarray, w: np.ndarray, sw: np.ndarray, b: np.ndarray,
                 block: int) -> np.ndarray:
    m_total, k_total = a.shape
    out = np.empty((m_total, w.shape[0]), dtype=np.float32)
    for m in range(m_total):
        for n in range(w.shape[0]):
            acc = np.float32(0.0)
            for k0 in range(0, k_total, block):
                part = np.float32(0.0)
                for k in range(k0, min(k0 + block, k_total)):
                    part += a[m, k] * w[n, k]
                s = np.float32(sw[n // block, k0 // block] * sa[m, k0 // block])
                acc += np.float32(part * s)
            out[m, n] = np.float32(acc + b[n])
    return out


def gemm_fp8b_ref(a_codes: np.ndarray, a_scales: np.ndarray, w_codes: np.ndarray, w_scales: np.ndarray,
                  bias: np.ndarray | None = None, block: int = 128) -> np.ndarray:
    """The 128x128-block W8A8 GEMM (kernels/gemm_fp8b.py): per 128-wide K block the fp32 sum of the
    code products (k ascending), times fl(sw[n // 128, kb] sa[m, kb]), added in fp32; then the bias
    and one rounding to fp16. Scales: a (M, cdiv(K, 128)), w (cdiv(N, 128), cdiv(K, 128))."""
    a, w = decode_e4m3(a_codes), decode_e4m3(w_codes)
    m, k = a.shape
    n = w.shape[0]
    kb = -(-k // block)
    sa, sw = np.asarray(a_scales), np.asarray(w_scales)
    nb = -(-n // block)
    if sa.dtype != np.float32 or sa.shape != (m, kb) or sw.dtype != np.float32 or sw.shape != (nb, kb):
        raise ValueError(f"scales: expected float32 a ({m}, {kb}) and w ({-(-n // block)}, {kb}), "
                         f"got {sa.dtype} {sa.shape} and {sw.dtype} {sw.shape}")
    b = np.zeros(n, np.float32) if bias is None else np.asarray(bias, np.float16).astype(np.float32)
    return to_fp16(_w8a8_blocks(a, sa, w, sw, b, block))
