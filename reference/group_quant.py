"""Uniform group quantization of weights (int8/4/3/2, groups along K), as docs/formats.md pins it.

W is N x K (y = x @ W.T). K is padded with zeros to Kp, a multiple of 32 and of the group size G, and
the padding takes part in quantization like any weight (so it gets the group's zero code and
dequantizes to exactly 0). Per group an fp16 scale s and an fp16 zero z (an integer code value):

    asymmetric: min = min(w, 0), max = max(w, 0) (the range includes 0, GPTQ's convention),
                s = fp16((max - min) / (2^b - 1)) in fp32 (s = 1 when max == min),
                z = clamp(rne(-min / s), 0, 2^b - 1)
    symmetric:  s = fp16(max|w| / (2^(b-1) - 1)) in fp32 (s = 1 when max|w| == 0), z = 2^(b-1)
    code:       q = clamp(rne(w / s) + z, 0, 2^b - 1)          (fp32, rne = round half to even)
    dequant:    w_hat = fp16(float32(q - z) * float32(s))       (the product is exact)

Two edge cases the contract leaves open, decided here: a scale that rounds to fp16 zero (a group
range below ~2^-25 * (2^b - 1)) becomes the smallest fp16 subnormal 2^-24, so codes stay finite; a
scale that overflows fp16 is an error (the weights are not fp16 weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpsim.reference.packing import check_bits, pack_codes, unpack_codes
from mpsim.traces.accounting import padded_k

__all__ = [
    "GroupQuantWeight",
    "dequantize_codes",
    "dequantize_group",
    "group_codes",
    "pack_codes",
    "quantize_group",
    "resolve_group_size",
    "unpack_codes",
]

WHOLE_ROW = -1
_FP16_TINY = np.float16(2.0**-24)


@dataclass(frozen=True)
class GroupQuantWeight:
    """A group-quantized N x K weight. `group_size` is the resolved G (Kp for whole-row groups)."""

    qweight: np.ndarray  # int32 (N, Kp*bits/32)
    scales: np.ndarray  # fp16 (N, Kp/G)
    zeros: np.ndarray  # fp16 (N, Kp/G), integer code values
    bits: int
    group_size: int
    k: int  # original K, before padding
    n: int
    symmetric: bool = False

    @property
    def k_padded(self) -> int:
        return self.scales.shape[1] * self.group_size


def resolve_group_size(k: int, group_size: int) -> int:
    """The G actually used: whole-row (-1 or K) -> K rounded up to 32; else a positive multiple of 32."""
    if k < 1:
        raise ValueError(f"K={k}: a weight needs at least one column")
    if group_size in (WHOLE_ROW, k):
        return padded_k(k, group_size)
    if group_size < 32 or group_size % 32:
        raise ValueError(
            f"group_size={group_size!r}: expected 32, 64, 128 (any positive multiple of 32), "
            f"or -1 / K={k} for whole-row groups"
        )
    return group_size


def _group_params(wg: np.ndarray, bits: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-group fp16 (scale, zero) for fp32 groups wg of shape (N, ngroups, G)."""
    qmax = np.float32((1 << bits) - 1)
    if symmetric:
        amax = np.abs(wg).max(axis=2)
        s32 = amax / np.float32((1 << (bits - 1)) - 1)
        s32 = np.where(amax == 0, np.float32(1), s32)
        zero = np.full(amax.shape, np.float32(1 << (bits - 1)), dtype=np.float32)
    else:
        # The range always includes 0 (GPTQ's convention): a one-sign group stays representable.
        mn = np.minimum(wg.min(axis=2), np.float32(0))
        mx = np.maximum(wg.max(axis=2), np.float32(0))
        s32 = np.where(mx == mn, np.float32(1), (mx - mn) / qmax)
    with np.errstate(over="ignore"):
        scale = s32.astype(np.float16)
    if not np.isfinite(scale).all():
        raise ValueError("a group's scale overflows fp16: weights must be within the fp16 range")
    scale = np.where(scale == 0, _FP16_TINY, scale)
    if not symmetric:
        zero = np.clip(np.rint(-mn / scale.astype(np.float32)), 0, qmax)
    return scale, zero.astype(np.float16)


def group_codes(wg: np.ndarray, scale: np.ndarray, zero: np.ndarray, bits: int) -> np.ndarray:
    """Codes q = clamp(rne(w / s) + z, 0, 2^b - 1) in fp32, for wg (N, ngroups, G)."""
    s = scale.astype(np.float32)[:, :, None]
    z = zero.astype(np.float32)[:, :, None]
    q = np.clip(np.rint(wg / s) + z, 0, np.float32((1 << bits) - 1))
    return q.astype(np.uint8)


def quantize_group(w: np.ndarray, bits: int, group_size: int, symmetric: bool = False) -> GroupQuantWeight:
    """Quantize an fp16/fp32 weight (N, K) to the uniform group format of docs/formats.md."""
    check_bits(bits)
    w = np.asarray(w)
    if w.dtype not in (np.float16, np.float32) or w.ndim != 2:
        raise ValueError(f"w: expected a float16/float32 (N, K) array, got {w.dtype} {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("w: contains inf or nan")
    n, k = w.shape
    g = resolve_group_size(k, group_size)  # validates G before padded_k (traces/accounting.py) pads
    kp = padded_k(k, g)
    w32 = np.zeros((n, kp), dtype=np.float32)
    w32[:, :k] = w
    wg = w32.reshape(n, kp // g, g)
    scale, zero = _group_params(wg, bits, symmetric)
    codes = group_codes(wg, scale, zero, bits).reshape(n, kp)
    return GroupQuantWeight(
        qweight=pack_codes(codes, bits),
        scales=scale,
        zeros=zero,
        bits=bits,
        group_size=g,
        k=k,
        n=n,
        symmetric=symmetric,
    )


def dequantize_codes(codes: np.ndarray, scales: np.ndarray, zeros: np.ndarray, group_size: int) -> np.ndarray:
    """w_hat = fp16(float32(q - z) * float32(s)) for codes (N, K') with K' <= ngroups * G."""
    kk = codes.shape[1]
    gidx = np.arange(kk) // group_size
    s = scales.astype(np.float32)[:, gidx]
    z = zeros.astype(np.float32)[:, gidx]
    return ((codes.astype(np.float32) - z) * s).astype(np.float16)


def dequantize_group(gw: GroupQuantWeight) -> np.ndarray:
    """The fp16 (N, K) weight a group-quantized weight stands for (padding dropped)."""
    codes = unpack_codes(gw.qweight, gw.bits, gw.k)
    return dequantize_codes(codes, gw.scales, gw.zeros, gw.group_size)


def scale_zero_words(scales: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """uint32 (N, KP/G): each group's fp16 scale bits in the low 16 bits and its zero's in the high
    (TurboMind keeps its scales and zeros interleaved so): the words the group kernels' W_hat loops
    read, one 4-byte load a row and group (kernels/sz_words.py, docs/formats.md)."""
    s = np.ascontiguousarray(scales, dtype=np.float16).view(np.uint16).astype(np.uint32)
    z = np.ascontiguousarray(zeros, dtype=np.float16).view(np.uint16).astype(np.uint32)
    return (z << np.uint32(16)) | s
