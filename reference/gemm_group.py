"""Reference GEMM/GEMV on uniform group-quantized weights (int8/4/3/2, docs/formats.md).

Each weight row is dequantized exactly as the format says, w_hat = fp16(float32(q - z) * float32(s)),
into an fp32 row buffer (the fp16 value, widened), then accumulated like the fp16 GEMM: per output one
fp32 accumulator, k ascending over the original K (the padding is never read), + bias, round to fp16.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp16 import round_fp16_inplace, to_fp16, widen_bias
from mpsim.reference.gemm_common import M_TILE, accumulate_row, prepare_x, store_tile
from mpsim.reference.group_quant import GroupQuantWeight
from mpsim.reference.packing import check_bits


@njit(cache=True)
def dequant_row(
    words: np.ndarray, scales: np.ndarray, zeros: np.ndarray, bits: int, group: int, out: np.ndarray
) -> None:
    """One row: uint32 words -> fp16-exact fp32 weights out[0:K] (K = out.size).

    Walks 32-code chunks (b words each, cut into units of P codes: code p of a unit at bit
    16*(p % 2) + b*(p // 2); reference/packing.py); G is a multiple of 32, so one chunk lies in one
    group. The fourth 3-bit unit is gathered from the words' top nibbles first.
    """
    mask = np.uint32((1 << bits) - 1)
    per = 8 if bits == 3 else 32 // bits
    units = np.empty(4 if bits == 3 else bits, dtype=np.uint32)
    k_total = out.size
    for c in range((k_total + 31) >> 5):
        s, z = scales[(c << 5) // group], zeros[(c << 5) // group]
        for u in range(bits):
            units[u] = words[c * bits + u]
        if bits == 3:
            w0, w1, w2 = units[0], units[1], units[2]
            units[3] = (((w0 >> np.uint32(12)) & np.uint32(0x000F000F))
                        | ((w1 >> np.uint32(8)) & np.uint32(0x00F000F0))
                        | ((w2 >> np.uint32(4)) & np.uint32(0x0F000F00)))
        for i in range(min(32, k_total - (c << 5))):
            p = i % per
            v = units[i // per] >> np.uint32(16 * (p & 1) + bits * (p >> 1))
            out[(c << 5) + i] = (np.float32(v & mask) - z) * s
    round_fp16_inplace(out)


@njit(cache=True)
def gemm_group_f32(
    xt: np.ndarray,
    words: np.ndarray,
    scales: np.ndarray,
    zeros: np.ndarray,
    bits: int,
    group: int,
    bias: np.ndarray,
) -> np.ndarray:
    """xt (K, M) fp32, words uint32 (N, Kp*b/32), scales/zeros fp32 (N, Kp/G) -> (M, N) fp32."""
    k, m_total = xt.shape
    n_total = words.shape[0]
    out = np.empty((m_total, n_total), dtype=np.float32)
    acc = np.empty(M_TILE, dtype=np.float32)
    wrow = np.empty(k, dtype=np.float32)
    for m0 in range(0, m_total, M_TILE):
        m1 = min(m0 + M_TILE, m_total)
        for n in range(n_total):
            dequant_row(words[n], scales[n], zeros[n], bits, group, wrow)
            accumulate_row(xt, wrow, m0, m1, acc)
            store_tile(out, acc, m0, m1, n, bias)
    return out


def gemm_group_ref(
    x: np.ndarray,
    qweight: np.ndarray,
    scales: np.ndarray,
    zeros: np.ndarray,
    bits: int,
    group_size: int,
    k: int,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """fp16 x (M, k) @ dequant(qweight).T (+ bias) -> fp16 (M, N); group_size is the resolved G."""
    check_bits(bits)
    n = qweight.shape[0]
    if qweight.dtype != np.int32 or qweight.ndim != 2:
        raise ValueError(f"qweight: expected int32 (N, Kp*b/32), got {qweight.dtype} {qweight.shape}")
    kp = qweight.shape[1] * 32 // bits
    if scales.shape != (n, kp // group_size) or zeros.shape != scales.shape or k > kp:
        raise ValueError(
            f"scales {scales.shape} / zeros {zeros.shape} do not match qweight {qweight.shape} "
            f"with bits={bits}, group_size={group_size}, k={k}"
        )
    xt = prepare_x(x, k)
    b32, _ = widen_bias(bias, n)
    out = gemm_group_f32(
        xt,
        np.ascontiguousarray(qweight).view(np.uint32),
        np.ascontiguousarray(scales, dtype=np.float32),
        np.ascontiguousarray(zeros, dtype=np.float32),
        bits,
        group_size,
        b32,
    )
    return to_fp16(out)


def gemm_group_weight_ref(x: np.ndarray, gw: GroupQuantWeight, bias: np.ndarray | None = None) -> np.ndarray:
    """gemm_group_ref taking the GroupQuantWeight dataclass."""
    return gemm_group_ref(x, gw.qweight, gw.scales, gw.zeros, gw.bits, gw.group_size, gw.k, bias)
