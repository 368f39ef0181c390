"""numba twins of the fp8 / fp4 formats and quantizers: bit for bit what the numpy references compute.

numba cannot type float16 arrays, so each wrapper widens fp16 input to fp32 at the boundary (exact)
and the loops run one scalar at a time on the fp32 value: encode (reference/minifloat.py), decode
from the code's fields, the fp8 tile quantizer (reference/fp8_quant.py) and the MXFP4 / NVFP4 block
quantizers (reference/fp4_quant.py). tests/reference/test_ref_fp_numba.py checks every output bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mpsim.reference.fp4 import E2M1, E2M1_EMAX, E2M1_MAX, pack_fp4
from mpsim.reference.fp4_quant import NVFP4_MIN_BLOCK_SCALE, Fp4Weight, fp4_blocks
from mpsim.reference.fp8 import E4M3, E4M3_MAX
from mpsim.reference.fp8_quant import FP8_TOKEN_MIN_SCALE, Fp8Tensor, check_fp16_matrix, tile_shape
from mpsim.reference.minifloat import MiniFloat, as_float32

__all__ = [
    "decode_numba",
    "encode_numba",
    "quantize_fp4_numba",
    "quantize_fp8_numba",
    "quantize_fp8_tokens_numba",
]


def _params(fmt: MiniFloat, saturate: bool) -> tuple[int, int, int, int, int, int, bool]:
    ovf = fmt.max_code if saturate else fmt.overflow_code
    return fmt.mbits, fmt.emin, fmt.max_code, fmt.nan_code, ovf, fmt.sign_bit, fmt.ieee_specials


@njit(cache=True)
def _encode_scalar(
    x: float, mbits: int, emin: int, max_code: int, nan_code: int, ovf_code: int, sign_bit: int
) -> int:
    """One fp32 value -> code: RNE, gradual underflow, overflow and inf -> ovf_code (max when saturating)."""
    sign = sign_bit if math.copysign(1.0, x) < 0 else 0
    a = abs(np.float64(x))
    if a != a:
        return nan_code | sign
    if a == np.inf:
        return ovf_code | sign
    ex = emin
    if a > 0:
        ex = max(math.frexp(a)[1] - 1, emin)
    n = np.rint(math.ldexp(a, mbits - ex))
    mag = ((ex - emin) << mbits) + int(n)
    if mag > max_code:
        mag = ovf_code
    return mag | sign


@njit(cache=True)
def _encode_nb(
    x: np.ndarray, mbits: int, emin: int, max_code: int, nan_code: int, ovf: int, sign_bit: int
) -> np.ndarray:
    out = np.empty(x.size, dtype=np.uint8)
    for i in range(x.size):
        out[i] = _encode_scalar(x[i], mbits, emin, max_code, nan_code, ovf, sign_bit)
    return out


@njit(cache=True)
def _decode_nb(
    codes: np.ndarray, mbits: int, emin: int, max_code: int, nan_code: int, sign_bit: int, ieee: bool
) -> np.ndarray:
    out = np.empty(codes.size, dtype=np.float32)
    for i in range(codes.size):
        c = int(codes[i])
        mag = c & (sign_bit - 1)
        s = -1.0 if c & sign_bit else 1.0
        if mag > max_code:  # past the largest finite code: inf (IEEE-like, exponent all ones, M = 0) or NaN
            v = np.inf if ieee and mag == max_code + 1 else np.nan
        elif mag < (1 << mbits):
            v = math.ldexp(np.float64(mag), emin - mbits)
        else:
            e_field, m_field = mag >> mbits, mag & ((1 << mbits) - 1)
            v = math.ldexp(np.float64((1 << mbits) + m_field), e_field - (1 - emin) - mbits)
        out[i] = np.float32(math.copysign(v, s))
    return out


def encode_numba(x: np.ndarray, fmt: MiniFloat, saturate: bool = True) -> np.ndarray:
    """numba twin of minifloat.encode: fp32/fp16 -> uint8 codes of the same shape."""
    x32 = as_float32(x, f"{fmt.name} input")
    if not fmt.has_nan and np.isnan(x32).any():
        raise ValueError(f"{fmt.name} has no NaN: the input holds NaN")
    mbits, emin, max_code, nan_code, ovf, sign_bit, _ = _params(fmt, saturate)
    flat = np.ascontiguousarray(x32).reshape(-1)
    return _encode_nb(flat, mbits, emin, max_code, nan_code, ovf, sign_bit).reshape(x32.shape)


def decode_numba(codes: np.ndarray, fmt: MiniFloat) -> np.ndarray:
    """numba twin of minifloat.decode: uint8 codes -> float32."""
    codes = np.asarray(codes)
    if codes.dtype != np.uint8 or (codes.size and int(codes.max()) >= fmt.sign_bit << 1):
        raise ValueError(f"{fmt.name} codes: expected uint8 below {fmt.sign_bit << 1}")
    mbits, emin, max_code, nan_code, _, sign_bit, ieee = _params(fmt, True)
    flat = np.ascontiguousarray(codes).reshape(-1)
    return _decode_nb(flat, mbits, emin, max_code, nan_code, sign_bit, ieee).reshape(codes.shape)


_E4 = _params(E4M3, True)[:6]
_E2 = _params(E2M1, True)[:6]


@njit(cache=True)
def _fp8_tiles_nb(
    x: np.ndarray, tr: int, tc: int, min_scale: np.float32, e4: tuple
) -> tuple[np.ndarray, np.ndarray]:
    """min_scale > 0: the per-token floor; 0: weights (s = 1 for an all-zero tile)."""
    n, k = x.shape
    nr, nc = (n + tr - 1) // tr, (k + tc - 1) // tc
    scales = np.empty((nr, nc), dtype=np.float32)
    codes = np.empty((n, k), dtype=np.uint8)
    for i in range(nr):
        for j in range(nc):
            r1, c1 = min(n, (i + 1) * tr), min(k, (j + 1) * tc)
            amax = np.float32(0)
            for r in range(i * tr, r1):
                for c in range(j * tc, c1):
                    amax = max(amax, abs(x[r, c]))
            s = np.float32(amax / np.float32(E4M3_MAX))
            if min_scale > 0:
                s = max(s, min_scale)
            elif amax == 0:
                s = np.float32(1)
            scales[i, j] = s
            for r in range(i * tr, r1):
                for c in range(j * tc, c1):
                    codes[r, c] = _encode_scalar(np.float32(x[r, c] / s), *e4)
    return codes, scales


def quantize_fp8_numba(w: np.ndarray, granularity: str = "tensor") -> Fp8Tensor:
    """numba twin of fp8_quant.quantize_fp8."""
    w32 = np.ascontiguousarray(check_fp16_matrix(w, "w"))
    tile = tile_shape(granularity, *w32.shape)
    codes, scales = _fp8_tiles_nb(w32, tile[0], tile[1], np.float32(0), _E4)
    return Fp8Tensor(codes=codes, scales=scales, tile=tile)


def quantize_fp8_tokens_numba(x: np.ndarray) -> Fp8Tensor:
    """numba twin of fp8_quant.quantize_fp8_tokens."""
    x32 = np.ascontiguousarray(check_fp16_matrix(x, "x"))
    codes, scales = _fp8_tiles_nb(x32, 1, x32.shape[1], FP8_TOKEN_MIN_SCALE, _E4)
    return Fp8Tensor(codes=codes, scales=scales, tile=(1, x32.shape[1]))


@njit(cache=True)
def _block_amax(wb: np.ndarray, r: int, j: int) -> np.float32:
    """The largest |value| of block j of row r (fp32, as the blocks' scales are chosen)."""
    amax = np.float32(0)
    for i in range(wb.shape[2]):
        amax = max(amax, abs(wb[r, j, i]))
    return amax


@njit(cache=True)
def _mxfp4_nb(wb: np.ndarray, e2: tuple) -> tuple[np.ndarray, np.ndarray]:
    n, nb, b = wb.shape
    codes = np.empty((n, nb, b), dtype=np.uint8)
    sc = np.empty((n, nb), dtype=np.uint8)
    for r in range(n):
        for j in range(nb):
            amax = _block_amax(wb, r, j)
            shared = math.frexp(np.float64(amax))[1] - 1 - E2M1_EMAX if amax > 0 else -127
            shared = min(max(shared, -127), 127)
            sc[r, j] = shared + 127
            x_scale = np.float32(math.ldexp(1.0, shared))
            for i in range(b):
                codes[r, j, i] = _encode_scalar(np.float32(wb[r, j, i] / x_scale), *e2)
    return codes, sc


@njit(cache=True)
def _nvfp4_nb(wb: np.ndarray, g: np.float32, e2: tuple, e4: tuple) -> tuple[np.ndarray, np.ndarray]:
    n, nb, b = wb.shape
    codes = np.empty((n, nb, b), dtype=np.uint8)
    sb = np.empty((n, nb), dtype=np.uint8)
    for r in range(n):
        for j in range(nb):
            amax = _block_amax(wb, r, j)
            s = np.float32(amax / np.float32(np.float32(E2M1_MAX) * g))
            s = np.float32(1) if amax == 0 else max(s, np.float32(NVFP4_MIN_BLOCK_SCALE))
            sb[r, j] = _encode_scalar(s, *e4)
            s_val = _decode_nb(sb[r, j : j + 1], e4[0], e4[1], e4[2], e4[3], e4[5], False)[0]
            denom = np.float32(s_val * g)
            for i in range(b):
                codes[r, j, i] = _encode_scalar(np.float32(wb[r, j, i] / denom), *e2)
    return codes, sb


def quantize_fp4_numba(w: np.ndarray, kind: str) -> Fp4Weight:
    """numba twin of fp4_quant.quantize_fp4 (the global scale g: the same fp32 division, in numpy)."""
    wb = np.ascontiguousarray(fp4_blocks(w, kind))
    n, nb, b = wb.shape
    if kind == "mxfp4":
        codes, scales = _mxfp4_nb(wb, _E2)
        g = np.float32(1)
    else:
        amax = np.abs(wb).max()
        g = np.float32(1) if amax == 0 else np.float32(amax / np.float32(E2M1_MAX * E4M3_MAX))
        codes, scales = _nvfp4_nb(wb, g, _E2, _E4)
    packed = pack_fp4(codes.reshape(n, nb * b))
    return Fp4Weight(packed=packed, scales=scales, global_scale=g, kind=kind, k=w.shape[1])
