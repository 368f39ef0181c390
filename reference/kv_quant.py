"""KV-cache quantization (int8 / int4, per token per head, asymmetric), as docs/formats.md pins it.

For one row x of head_dim fp16 values (the last axis):

    mn, mx = min(x), max(x)                              (exact in fp32)
    scale  = fp16((mx - mn) / (2^b - 1))                 (fp32 subtraction and division, RN)
    zero   = fp16(mn)                                    (exact: mn is an fp16 value)
    q      = clamp(rne((x - zero) / scale), 0, 2^b - 1)  (fp32; q = 0 when scale == 0)
    rne(v) = (v + 1.5*2^23) - 1.5*2^23                   (fp32; exact RNE for 0 <= v < 2^22)
    x_hat  = fp16(float32(q) * float32(scale) + float32(zero))   (the product is exact)

int4 codes go two to a byte: element 2i in the low nibble, 2i+1 in the high nibble.
"""

from __future__ import annotations

import numpy as np

KV_BITS = (8, 4)
_RNE_MAGIC = np.float32(12582912.0)  # 1.5 * 2^23


def _check_kv_bits(bits: int) -> None:
    if bits not in KV_BITS:
        raise ValueError(f"KV bits={bits!r}: expected one of {KV_BITS} (16 means unquantized)")


def rne_magic(v: np.ndarray) -> np.ndarray:
    """Round half to even of fp32 v in [0, 2^22) by the 1.5*2^23 trick every backend can do."""
    return (v + _RNE_MAGIC) - _RNE_MAGIC


def kv_row_params(x32: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero) fp16 over the last axis of an fp32 array holding fp16 values."""
    # -0 + 0 = +0: a minimum or maximum of -0 counts as +0 (the scale and the stored zero).
    mn, mx = x32.min(axis=-1) + np.float32(0), x32.max(axis=-1) + np.float32(0)
    scale = ((mx - mn) / np.float32((1 << bits) - 1)).astype(np.float16)
    return scale, mn.astype(np.float16)


def kv_codes(x32: np.ndarray, scale: np.ndarray, zero: np.ndarray, bits: int) -> np.ndarray:
    """Codes clamp(rne((x - zero) / scale), 0, 2^b - 1) in fp32; 0 where scale == 0."""
    s = scale.astype(np.float32)[..., None]
    z = zero.astype(np.float32)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        v = (x32 - z) / s
    v = np.where(s == 0, np.float32(0), v)
    q = np.clip(rne_magic(np.clip(v, 0, np.float32(2**22 - 1))), 0, np.float32((1 << bits) - 1))
    return q.astype(np.uint8)


def pack_int4(codes: np.ndarray) -> np.ndarray:
    """uint8 codes [..., D] (each < 16, D even) -> uint8 bytes [..., D/2], low nibble first."""
    if codes.shape[-1] % 2:
        raise ValueError(f"int4 KV needs an even head_dim, got {codes.shape[-1]}")
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """uint8 bytes [..., D/2] -> uint8 codes [..., D]."""
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def kv_quant_ref(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """fp16 x [..., D] -> (codes uint8 [..., D] (int8) or [..., D/2] (int4), scale fp16, zero fp16)."""
    _check_kv_bits(bits)
    x = np.asarray(x)
    if x.dtype != np.float16 or x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x: expected a float16 array [..., D] with D >= 1, got {x.dtype} {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x: contains inf or nan; the KV quantizer needs finite values")
    if bits == 4 and x.shape[-1] % 2:
        raise ValueError(f"int4 KV needs an even head_dim, got {x.shape[-1]}")
    x32 = x.astype(np.float32)
    scale, zero = kv_row_params(x32, bits)
    codes = kv_codes(x32, scale, zero, bits)
    return (pack_int4(codes) if bits == 4 else codes), scale, zero


def kv_dequant_ref(codes: np.ndarray, scale: np.ndarray, zero: np.ndarray, bits: int, d: int) -> np.ndarray:
    """(codes, scale, zero) -> fp16 [..., d]: fp16(float32(q) * float32(scale) + float32(zero))."""
    _check_kv_bits(bits)
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"codes: expected uint8, got {codes.dtype}")
    q = unpack_int4(codes) if bits == 4 else codes
    if q.shape[-1] != d or q.shape[:-1] != np.shape(scale) or np.shape(scale) != np.shape(zero):
        raise ValueError(
            f"shapes do not match: codes {codes.shape} ({bits}-bit, d={d}), "
            f"scale {np.shape(scale)}, zero {np.shape(zero)}"
        )
    s = np.asarray(scale, dtype=np.float16).astype(np.float32)[..., None]
    z = np.asarray(zero, dtype=np.float16).astype(np.float32)[..., None]
    return (q.astype(np.float32) * s + z).astype(np.float16)
