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

from mpsim.reference.anyprec import AnyPrecWeight, pair_exp, pair_table
from mpsim.reference.fp16 import round_fp16, to_fp16, widen_bias
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


@njit(cache=True)
def gemv_pair_partial_f32(x: np.ndarray, planes: np.ndarray, bits: int, pairs: np.ndarray,
                          lanes: int, trips: int, e: int, bias: np.ndarray) -> np.ndarray:
    """x fp32 (Kp,) zero past K, planes uint32 (P, N, Kp/32), pairs fp32 (N, 4^bits, 2) -> fp32 (N,):
    lane l's runs of trips tiles, p = fp16(p + fp16(fp16(x 2^-E) w)), acc_l += p; lanes ascending,
    times 2^E, + bias."""
    kp = x.size
    n_total = planes.shape[1]
    out = np.empty(n_total, dtype=np.float32)
    acc = np.empty(lanes, dtype=np.float32)
    wrow = np.empty(kp, dtype=np.float32)
    xs = np.empty(kp, dtype=np.float32)
    down, up = np.float32(2.0 ** -e), np.float32(2.0 ** e)
    for k in range(kp):
        xs[k] = round_fp16(x[k] * down)  # the power-of-two product is exact in fp32
    run = lanes * trips
    for n in range(n_total):
        lookup_row_pairs(planes, n, bits, pairs[n], wrow)
        acc[:] = np.float32(0.0)
        for r0 in range(0, kp, run):
            for lane in range(lanes):
                p = np.float32(0.0)
                for t in range(trips):
                    k = r0 + t * lanes + lane
                    if k < kp:
                        p = round_fp16(p + round_fp16(xs[k] * wrow[k]))
                acc[lane] = acc[lane] + p
        total = np.float32(0.0)
        for lane in range(lanes):
            total += acc[lane]
        out[n] = total * up + bias[n]
    return out


def gemv_anyprec_partial_ref(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int,
                             k: int, lanes: int, trips: int,
                             bias: np.ndarray | None = None) -> np.ndarray:
    """fp16 x (1, k) @ W_b.T (+ bias) -> fp16 (1, N) in the one-row GEMV's partial-sum order at
    bits <= PAIR_MAX_BITS (kernels/gemv_anyprec.py): `lanes` = its BLOCK_K, `trips` = its T, E =
    pair_exp(lut, trips)."""
    if not 1 <= bits <= PAIR_MAX_BITS or lanes < 1 or trips < 1:
        raise ValueError(f"bits={bits} lanes={lanes} trips={trips}: expected bits 1..{PAIR_MAX_BITS}"
                         f" and positive lanes and trips")
    xt = prepare_x(x, k)
    if xt.shape[1] != 1:
        raise ValueError(f"x: expected one row (1, {k}), got {np.asarray(x).shape}")
    n, words = qweight.shape[1], qweight.shape[2]
    if qweight.dtype != np.int32 or lut.shape != (n, 1 << bits) or k > words * 32:
        raise ValueError(f"qweight {qweight.dtype} {qweight.shape} / lut {lut.shape} / k={k} do "
                         f"not match at {bits} bits")
    xp = np.zeros(words * 32, dtype=np.float32)
    xp[:k] = xt[:, 0]
    b32, _ = widen_bias(bias, n)
    planes = np.ascontiguousarray(qweight).view(np.uint32)
    out = gemv_pair_partial_f32(xp, planes, bits, pair_table(lut).astype(np.float32), lanes, trips,
                                pair_exp(lut, trips), b32)
    return to_fp16(out)[None, :]
