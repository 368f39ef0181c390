"""FP4 (e2m1) weight quantizers with block scales: MXFP4 and NVFP4, as docs/formats.md#fp4 pins them.

W is an fp16 (N, K) matrix; K is padded with zeros to a multiple of the block (zeros change no amax and
encode to code 0). Blocks run along K within one row.

MXFP4 (OCP Microscaling Formats v1.0; as Microsoft's microxcaling reference library
``mx/mx_ops.py`` computes it), block 32, e8m0 scale:
    X     = 2^(floor(log2(amax_b)) - 2), at least 2^-127 (all-zero block: 2^-127; the top, 2^125 for
            fp32 input, never reaches the e8m0 limit 2^127)
    q     = e2m1_satfinite(x / X)               (exact division by a power of two; values in (6, 8)*X
                                                 clamp to 6, as the spec says)
    x_hat = e2m1(q) * X                         (exact in fp32)

NVFP4 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", 2025), block 16,
e4m3 block scale, fp32 per-tensor scale g. The order of operations and the two edge rules are those of
NVIDIA's Model Optimizer (``NVFP4QTensor``), which writes the published NVFP4 checkpoints (g is their
``weight_scale_2``; vLLM's kernels take its inverse 1/g as ``global_scale``):
    g     = fl(amax / (6 * 448)) in fp32, g = 1 when amax == 0
    s_b   = fl(amax_b / fl(6 * g)); 1 when amax_b == 0; at least 2^-9 (the smallest e4m3 subnormal,
            so no block scale underflows to 0)
    S_b   = e4m3_satfinite(s_b)                            (the stored e4m3 code; <= 448)
    q     = e2m1_satfinite(fl(x / fl(S_b * g)))
    x_hat = fl(fl(e2m1(q) * S_b) * g)                      (the inner product is exact: one rounding)

Storage: ``packed`` uint8 (N, Kp/2), two codes per byte (reference/fp4.py: element 2i low nibble);
``scales`` uint8 (N, Kp/B) codes (e8m0 for MX, e4m3 for NV), row-major (the engines' swizzled
scale layouts are a kernel-side permutation of this); ``global_scale`` fp32 (1.0 for MX).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpsim.reference.fp4 import (
    E2M1_MAX,
    decode_e2m1,
    decode_e8m0,
    encode_e2m1,
    mx_scale_code,
    pack_fp4,
    unpack_fp4,
)
from mpsim.reference.fp8 import E4M3_MAX, decode_e4m3, encode_e4m3

__all__ = ["FP4_BLOCK", "FP4_KINDS", "Fp4Weight", "dequantize_fp4", "nvfp4_global_scale", "quantize_fp4"]

FP4_KINDS = ("mxfp4", "nvfp4")
FP4_BLOCK = {"mxfp4": 32, "nvfp4": 16}
NVFP4_MIN_BLOCK_SCALE = 2.0**-9  # the smallest e4m3 subnormal


@dataclass(frozen=True)
class Fp4Weight:
    """An FP4 (N, K) weight: packed e2m1 codes, per-block scale codes, the per-tensor fp32 scale."""

    packed: np.ndarray  # uint8 (N, Kp/2)
    scales: np.ndarray  # uint8 (N, Kp/block): e8m0 (mxfp4) or e4m3 (nvfp4) codes
    global_scale: np.float32  # nvfp4: g; mxfp4: 1
    kind: str
    k: int

    @property
    def block(self) -> int:
        return FP4_BLOCK[self.kind]


def fp4_blocks(w: np.ndarray, kind: str) -> np.ndarray:
    """fp16 (N, K) -> fp32 blocks (N, Kp/B, B), zero-padded along K."""
    if kind not in FP4_KINDS:
        raise ValueError(f"fp4 kind={kind!r}: expected one of {FP4_KINDS}")
    w = np.asarray(w)
    if w.dtype != np.float16 or w.ndim != 2 or w.size == 0:
        raise ValueError(f"w: expected a non-empty float16 (N, K) array, got {w.dtype} {w.shape}")
    if not np.isfinite(w).all():
        raise ValueError("w: contains inf or nan; the fp4 quantizer needs finite values")
    n, k = w.shape
    b = FP4_BLOCK[kind]
    kp = -(-k // b) * b
    w32 = np.zeros((n, kp), dtype=np.float32)
    w32[:, :k] = w
    return w32.reshape(n, kp // b, b)


def nvfp4_global_scale(amax: np.float32) -> np.float32:
    """g = fl(amax / 2688) in fp32 (2688 = 6 * 448), 1 when amax == 0."""
    if amax == 0:
        return np.float32(1)
    return np.float32(np.float32(amax) / np.float32(E2M1_MAX * E4M3_MAX))


def _nvfp4(wb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.float32]:
    amax_b = np.abs(wb).max(axis=2)
    g = nvfp4_global_scale(amax_b.max())
    s = (amax_b / np.float32(np.float32(E2M1_MAX) * g)).astype(np.float32)
    s = np.where(amax_b == 0, np.float32(1), np.maximum(s, np.float32(NVFP4_MIN_BLOCK_SCALE)))
    sb = encode_e4m3(s.astype(np.float32), saturate=True)
    denom = (decode_e4m3(sb) * g).astype(np.float32)[:, :, None]  # > 0: S_b >= 2^-9
    return encode_e2m1((wb / denom).astype(np.float32)), sb, g


def _mxfp4(wb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sc = mx_scale_code(np.abs(wb).max(axis=2))
    codes = encode_e2m1((wb / decode_e8m0(sc)[:, :, None]).astype(np.float32))
    return codes, sc


def quantize_fp4(w: np.ndarray, kind: str) -> Fp4Weight:
    """fp16 weight (N, K) -> MXFP4 (kind="mxfp4") or NVFP4 (kind="nvfp4") per the module's rules."""
    wb = fp4_blocks(w, kind)
    n, nb, b = wb.shape
    if kind == "mxfp4":
        codes, scales = _mxfp4(wb)
        g = np.float32(1)
    else:
        codes, scales, g = _nvfp4(wb)
    packed = pack_fp4(codes.reshape(n, nb * b))
    return Fp4Weight(packed=packed, scales=scales, global_scale=g, kind=kind, k=w.shape[1])


def block_scale_values(fw: Fp4Weight) -> np.ndarray:
    """float32 (N, Kp/B) block scale values: 2^(c-127) (mxfp4) or e4m3(c) (nvfp4)."""
    return decode_e8m0(fw.scales) if fw.kind == "mxfp4" else decode_e4m3(fw.scales)


def dequantize_fp4(fw: Fp4Weight) -> np.ndarray:
    """float32 (N, K): fl(fl(e2m1(q) * S_b) * g), the inner product exact (g = 1 for MX: all exact)."""
    q = decode_e2m1(unpack_fp4(fw.packed))
    s = np.repeat(block_scale_values(fw), fw.block, axis=1)
    return ((q * s).astype(np.float32) * fw.global_scale).astype(np.float32)[:, : fw.k]
