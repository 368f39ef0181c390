"""Reference GEMM/GEMV on any-precision weights read at b bits (bit-planes + per-row fp16 LUT).

Each row's b-bit codes are assembled from planes 0..b-1 only (code = sum_j bit_j << (b-1-j)) and
looked up in lut[n] (exact fp16 values), or at <= 3 bits two at a time from the row's pair table
(reference/anyprec.py::pair_table, which the kernels' GEMV and GEMM read at every row count); then the
accumulation of the fp16 GEMM: per output one fp32 accumulator, k ascending over the original K,
+ bias, round to fp16.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.anyprec import AnyPrecWeight, pair_table
from mpsim.reference.fp16 import to_fp16, widen_bias
from mpsim.reference.gemm_common import M_TILE, accumulate_row, prepare_x, store_tile
from mpsim.traces.accounting import PAIR_MAX_BITS


@njit(cache=True)
def lookup_row(planes: np.ndarray, n: int, bits: int, lut: np.ndarray, out: np.ndarray) -> None:
    """Row n: planes uint32 (P, N, Kp/32) read at `bits` -> out[k] = lut[code_k] (fp32)."""
    for k in range(out.size):
        word, bit = k >> 5, np.uint32(k & 31)
        code = 0
        for j in range(bits):
            code = (code << 1) | int((planes[j, n, word] >> bit) & np.uint32(1))
        out[k] = lut[code]


@njit(cache=True)
def lookup_row_pairs(planes: np.ndarray, n: int, bits: int, pairs: np.ndarray,
                     out: np.ndarray) -> None:
    """Row n read from its pair table (fp32 (4^bits, 2)), as the kernels do at <= 3 bits:
    weights 2i, 2i+1 -> pairs[interleave(code_2i, code_2i+1)] (reference/anyprec.py::pair_index)."""
    for i in range(out.size // 2):
        index = 0
        for j in range(bits):  # plane j holds bit m = bits-1-j: to 2m (even) and 2m + 1 (odd)
            word, bit = (2 * i) >> 5, np.uint32((2 * i) & 31)
            pair_bits = int((planes[j, n, word] >> bit) & np.uint32(3))
            index |= pair_bits << (2 * (bits - 1 - j))
        out[2 * i] = pairs[index, 0]
        out[2 * i + 1] = pairs[index, 1]


@njit(cache=True)
def gemm_anyprec_f32(
    xt: np.ndarray, planes: np.ndarray, lut: np.ndarray, bits: int, bias: np.ndarray,
    pairs: np.ndarray
) -> np.ndarray:
    """xt (K, M) fp32, planes uint32 (P, N, Kp/32), lut fp32 (N, 2^bits) -> (M, N) fp32; reads
    pairs fp32 (N, 4^bits, 2) instead where it has rows (the kernels at <= 3 bits)."""
    k, m_total = xt.shape
    n_total = planes.shape[1]
    out = np.empty((m_total, n_total), dtype=np.float32)
    acc = np.empty(M_TILE, dtype=np.float32)
    wrow = np.empty(planes.shape[2] * 32, dtype=np.float32)
    use_pairs = pairs.shape[0] == n_total
    for m0 in range(0, m_total, M_TILE):
        m1 = min(m0 + M_TILE, m_total)
        for n in range(n_total):
            if use_pairs:
                lookup_row_pairs(planes, n, bits, pairs[n], wrow)
            else:
                lookup_row(planes, n, bits, lut[n], wrow[:k])
            accumulate_row(xt, wrow[:k], m0, m1, acc)
            store_tile(out, acc, m0, m1, n, bias)
    return out


def gemm_anyprec_ref(
    x: np.ndarray,
    qweight: np.ndarray,
    lut: np.ndarray,
    bits: int,
    k: int,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """fp16 x (M, k) @ W_b.T (+ bias) -> fp16 (M, N); qweight int32 (P, N, Kp/32), lut fp16 (N, 2^b)."""
    if qweight.dtype != np.int32 or qweight.ndim != 3 or not 1 <= bits <= qweight.shape[0]:
        raise ValueError(
            f"qweight: expected int32 (P, N, Kp/32) with P >= bits={bits}, "
            f"got {qweight.dtype} {qweight.shape}"
        )
    n = qweight.shape[1]
    if lut.shape != (n, 1 << bits) or k > qweight.shape[2] * 32:
        raise ValueError(f"lut {lut.shape} / k={k} do not match qweight {qweight.shape} at {bits} bits")
    xt = prepare_x(x, k)
    b32, _ = widen_bias(bias, n)
    planes = np.ascontiguousarray(qweight).view(np.uint32)
    with_pairs = bits <= PAIR_MAX_BITS
    pairs = pair_table(lut).astype(np.float32) if with_pairs else np.zeros((0, 1, 2), np.float32)
    out = gemm_anyprec_f32(xt, planes, np.ascontiguousarray(lut, dtype=np.float32), bits, b32, pairs)
    return to_fp16(out)


def gemm_anyprec_weight_ref(
    x: np.ndarray, apw: AnyPrecWeight, bits: int, bias: np.ndarray | None = None
) -> np.ndarray:
    """gemm_anyprec_ref taking the AnyPrecWeight dataclass."""
    apw.check_bits(bits)
    return gemm_anyprec_ref(x, apw.qweight, apw.luts[bits], bits, apw.k, bias)
