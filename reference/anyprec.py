"""Any-precision weights (PMPD / Any-Precision LLM): nested per-row clusters, bit-planes, fp16 LUTs.

Per output row, a sensitivity-weighted 1-D k-means gives 2^seed centroids and each extra bit splits
every cluster in two (reference/anyprec_cluster.py), up to the parent width P (4..8). The b-bit code
of a weight is its parent code >> (P - b). Storage, as docs/formats.md pins it:

- ``qweight`` int32 (P, N, Kp/32): plane j holds bit (P-1-j) of every code (plane 0 = MSB); weight k
  sits in word k // 32 at bit k % 32 (LSB first). K is padded to Kp (a multiple of 32) with code 0;
  the padding takes no part in clustering, so a GEMM must mask (or zero) x past K.
- ``luts[b]`` fp16 (N, 2^b) for b = seed..P: entry c = fp16 of the weighted mean of cluster c's
  weights (float64 mean, one rounding to fp16).
- Dequantization at b bits reads planes 0..b-1 only: code_b = sum_j bit_j << (b-1-j);
  w_hat = luts[b][n, code_b].
- At b <= PAIR_MAX_BITS (3) the GEMV and GEMM read ``pair_table(luts[b])`` fp16 (N, 4^b, 2) instead:
  entry spread(c_even) | spread(c_odd) << 1 (spread: bit m of a code to bit 2m) holds the values of
  weights 2i, 2i+1 whose codes are c_even, c_odd; with one activation row the GEMV scales x by
  2^-pair_exp(luts[b], 4) for its fp16 partial sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mpsim.reference.anyprec_cluster import cluster_rows
from mpsim.traces.accounting import PAIR_MAX_BITS, padded_k

PARENT_BITS = (4, 5, 6, 7, 8)
SEED_BITS = (1, 2, 3)
KMEANS_ITERS = 50


@dataclass(frozen=True)
class AnyPrecWeight:
    """An any-precision N x K weight: parent bit-planes plus one fp16 LUT per readable width."""

    qweight: np.ndarray  # int32 (P, N, Kp/32)
    luts: dict[int, np.ndarray] = field(repr=False)  # b -> fp16 (N, 2^b), b = seed..P
    parent_bits: int
    seed_bits: int
    k: int
    n: int

    def check_bits(self, bits: int) -> None:
        if not self.seed_bits <= bits <= self.parent_bits:
            raise ValueError(
                f"bits={bits!r}: this weight is readable at {self.seed_bits}..{self.parent_bits} bits"
            )


def _check_widths(parent_bits: int, seed_bits: int) -> None:
    if parent_bits not in PARENT_BITS:
        raise ValueError(f"parent_bits={parent_bits!r}: expected one of {PARENT_BITS}")
    if seed_bits not in SEED_BITS:
        raise ValueError(f"seed_bits={seed_bits!r}: expected one of {SEED_BITS}")


def _sensitivity(sensitivity: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if sensitivity is None:
        return np.ones(shape, dtype=np.float64)
    s = np.asarray(sensitivity, dtype=np.float64)
    if s.shape != shape:
        raise ValueError(f"sensitivity: expected shape {shape} (the weight's), got {s.shape}")
    if not (np.isfinite(s).all() and (s >= 0).all()):
        raise ValueError("sensitivity: expected finite, non-negative values")
    empty = np.flatnonzero(s.sum(axis=1) == 0)
    if empty.size:
        raise ValueError(f"sensitivity: row {int(empty[0])} sums to 0; every row needs some weight")
    return s


def codes_to_planes(codes: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes (N, Kp), Kp a multiple of 32 -> int32 bit-planes (bits, N, Kp/32), MSB first."""
    n, kp = codes.shape
    if kp % 32:
        raise ValueError(f"codes: width {kp} is not a multiple of 32")
    planes = np.empty((bits, n, kp // 32), dtype=np.int32)
    for j in range(bits):
        plane_bits = (codes >> (bits - 1 - j)) & 1
        packed = np.packbits(plane_bits.astype(np.uint8), axis=1, bitorder="little")
        planes[j] = packed.view("<u4").astype(np.uint32).view(np.int32)
    return planes


def planes_to_codes(qweight: np.ndarray, bits: int, k: int) -> np.ndarray:
    """int32 planes (P, N, Kp/32) -> the b-bit codes uint8 (N, k), reading planes 0..bits-1 only."""
    qweight = np.asarray(qweight)
    if qweight.dtype != np.int32 or qweight.ndim != 3:
        raise ValueError(f"qweight: expected int32 (P, N, Kp/32), got {qweight.dtype} {qweight.shape}")
    if not 1 <= bits <= qweight.shape[0]:
        raise ValueError(f"bits={bits}: qweight holds {qweight.shape[0]} planes")
    if not 0 <= k <= qweight.shape[2] * 32:
        raise ValueError(f"k={k} is outside 0..{qweight.shape[2] * 32}")
    codes = np.zeros((qweight.shape[1], k), dtype=np.uint8)
    for j in range(bits):
        raw = np.ascontiguousarray(qweight[j]).view(np.uint8)
        plane = np.unpackbits(raw, axis=1, bitorder="little")[:, :k]
        codes |= plane << (bits - 1 - j)
    return codes


def quantize_anyprec(
    w: np.ndarray,
    parent_bits: int = 4,
    seed_bits: int = 2,
    sensitivity: np.ndarray | None = None,
) -> AnyPrecWeight:
    """Any-precision quantization of an fp16/fp32 weight (N, K); sensitivity (N, K) weights k-means."""
    _check_widths(parent_bits, seed_bits)
    w = np.asarray(w)
    if w.dtype not in (np.float16, np.float32) or w.ndim != 2 or w.shape[1] < 1:
        raise ValueError(f"w: expected a float16/float32 (N, K) array, got {w.dtype} {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("w: contains inf or nan")
    n, k = w.shape
    sens = _sensitivity(sensitivity, w.shape)
    codes, luts64 = cluster_rows(
        np.ascontiguousarray(w, dtype=np.float64), sens, seed_bits, parent_bits, KMEANS_ITERS
    )
    kp = padded_k(k, None)
    padded = np.zeros((n, kp), dtype=np.uint8)
    padded[:, :k] = codes
    luts = {b: luts64[:, b, : 1 << b].astype(np.float16) for b in range(seed_bits, parent_bits + 1)}
    return AnyPrecWeight(codes_to_planes(padded, parent_bits), luts, parent_bits, seed_bits, k, n)


def dequantize_anyprec(apw: AnyPrecWeight, bits: int) -> np.ndarray:
    """fp16 (N, K) weight read at `bits` (seed..parent): luts[bits][n, code_bits]."""
    apw.check_bits(bits)
    codes = planes_to_codes(apw.qweight, bits, apw.k)
    return np.take_along_axis(apw.luts[bits], codes.astype(np.intp), axis=1)


def spread_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Bit m of each code moved to bit 2m (int64)."""
    codes = np.asarray(codes, dtype=np.int64)
    return sum(((codes >> m) & 1) << (2 * m) for m in range(bits))  # type: ignore[return-value]


def pair_index(even: np.ndarray, odd: np.ndarray, bits: int) -> np.ndarray:
    """The pair-table entry of two codes: their bit interleave, spread(even) | spread(odd) << 1."""
    return spread_bits(even, bits) | (spread_bits(odd, bits) << 1)


def pair_table(lut: np.ndarray) -> np.ndarray:
    """fp16 (N, 4^b, 2) pair table of an fp16 LUT (N, 2^b), 1 <= b <= PAIR_MAX_BITS: entry
    pair_index(ce, co) = (lut[n, ce], lut[n, co]) (docs/formats.md)."""
    lut = np.asarray(lut)
    size = lut.shape[1] if lut.ndim == 2 else 0
    if lut.dtype != np.float16 or size < 2 or size & (size - 1) or size > 1 << PAIR_MAX_BITS:
        raise ValueError(f"lut: expected fp16 (N, 2^bits) with bits 1..{PAIR_MAX_BITS}, "
                         f"got {lut.dtype} {lut.shape}")
    bits = size.bit_length() - 1
    even, odd = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    index = pair_index(even.ravel(), odd.ravel(), bits)
    out = np.empty((lut.shape[0], size * size, 2), dtype=np.float16)
    out[:, index, 0] = lut[:, even.ravel()]
    out[:, index, 1] = lut[:, odd.ravel()]
    return out


def pair_exp(lut: np.ndarray, trips: int) -> int:
    """E = max(0, ceil(log2(trips max |lut|))), the power of two the one-row GEMV's fp16 partial sums
    of `trips` K tiles scale x down by (kernels/gemv_anyprec.py; the same values as its pair table)."""
    return scale_exp(float(np.max(np.abs(np.asarray(lut, dtype=np.float64)), initial=0.0)), trips)


def scale_exp(top: float, trips: int) -> int:
    """max(0, ceil(log2(trips top))) for the largest |value| `top` of a table (pair_exp; the kernels'
    gemm_anyprec.pair_exp takes `top` from the device's pair table)."""
    if not math.isfinite(top):
        raise ValueError(f"lut: expected finite fp16 values, got max |value| {top}")
    mant, e = math.frexp(trips * top)  # trips * top = mant 2^e, 0.5 <= mant < 1 (0: mant 0)
    return max(0, e - 1 if mant == 0.5 else e)
