"""FP8 (e4m3) weight and activation quantizers: per-tensor, per-channel, 128x128 block, per-token.

All four are one rule over tiles of an fp16 matrix (docs/formats.md#fp8-quantization):

    amax = max |x| over the tile                          (exact)
    s    = fl(amax / 448) in fp32, s = 1 when amax == 0  (the dequantization scale, stored fp32)
    q    = e4m3_satfinite(fl(x / s))                      (fp32 division rounded to nearest, RNE code)
    x_hat = fl(e4m3(q) * s)                               (one fp32 rounding of the exact product)

Tiles: per-tensor (N, K) (one scale, the vLLM/TRT-LLM fp8 checkpoints' weight scale), per-channel
(1, K) (one scale per output row), block (128, 128) (DeepSeek-V3 style ``weight_scale_inv``, the last
row/column tiles may be partial), per-token (1, K) over activations x (M, K) (W8A8 dynamic activation
scales, computed at run time for every row). ``scales`` is always a 2-D float32 array of shape
(ceil(N / tile_rows), ceil(K / tile_cols)).

Per-token scales follow vLLM's dynamic per-token kernel (and FBGEMM's, which it matches): s =
max(fl(amax / 448), fl(1 / (448 * 512))), so a zero or tiny row gets the floor, not 1; the codes still
divide by s (not multiply by its inverse), as that kernel does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpsim.reference.fp8 import E4M3_MAX, decode_e4m3, encode_e4m3

__all__ = [
    "FP8_BLOCK",
    "FP8_TOKEN_MIN_SCALE",
    "GRANULARITIES",
    "Fp8Tensor",
    "dequantize_fp8",
    "quantize_fp8",
    "quantize_fp8_tokens",
    "tile_shape",
]

FP8_BLOCK = 128
FP8_TOKEN_MIN_SCALE = np.float32(np.float32(1) / np.float32(E4M3_MAX * 512))  # vLLM's min_scaling_factor
GRANULARITIES = ("tensor", "channel", "block")


@dataclass(frozen=True)
class Fp8Tensor:
    """An fp8-quantized (N, K) matrix: e4m3 codes and fp32 dequantization scales over tiles."""

    codes: np.ndarray  # uint8 (N, K), e4m3fn
    scales: np.ndarray  # float32 (ceil(N / tile[0]), ceil(K / tile[1]))
    tile: tuple[int, int]


def tile_shape(granularity: str, n: int, k: int) -> tuple[int, int]:
    """The (rows, cols) tile of one scale for a granularity of GRANULARITIES."""
    if granularity == "tensor":
        return n, k
    if granularity == "channel":
        return 1, k
    if granularity == "block":
        return FP8_BLOCK, FP8_BLOCK
    raise ValueError(f"fp8 granularity={granularity!r}: expected one of {GRANULARITIES}")


def check_fp16_matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float16 or x.ndim != 2:
        raise ValueError(f"{name}: expected a float16 (rows, cols) array, got {x.dtype} {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name}: expected at least one row and one column, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: contains inf or nan; the fp8 quantizer needs finite values")
    return x.astype(np.float32)


def tile_amax(x32: np.ndarray, tile: tuple[int, int]) -> np.ndarray:
    """max |x| over each (tile[0], tile[1]) tile of x (N, K); partial edge tiles count their elements."""
    n, k = x32.shape
    tr, tc = tile
    nr, nc = -(-n // tr), -(-k // tc)
    padded = np.zeros((nr * tr, nc * tc), dtype=np.float32)
    padded[:n, :k] = np.abs(x32)
    return padded.reshape(nr, tr, nc, tc).max(axis=(1, 3))


def expand_tiles(per_tile: np.ndarray, tile: tuple[int, int], n: int, k: int) -> np.ndarray:
    """Repeat one value per tile over its elements: (nr, nc) -> (n, k)."""
    return np.repeat(np.repeat(per_tile, tile[0], axis=0), tile[1], axis=1)[:n, :k]


def fp8_scales(amax: np.ndarray, min_scale: np.float32 | None = None) -> np.ndarray:
    """s = fl(amax / 448) in fp32; then at least min_scale when given, else 1 where amax == 0."""
    s = (amax.astype(np.float32) / np.float32(E4M3_MAX)).astype(np.float32)
    if min_scale is not None:
        return np.maximum(s, min_scale).astype(np.float32)
    return np.where(amax == 0, np.float32(1), s).astype(np.float32)


def quantize_tiles(x32: np.ndarray, tile: tuple[int, int], min_scale: np.float32 | None = None) -> Fp8Tensor:
    """The module's rule over tiles of an fp32 matrix holding fp16 values."""
    n, k = x32.shape
    scales = fp8_scales(tile_amax(x32, tile), min_scale)
    codes = encode_e4m3((x32 / expand_tiles(scales, tile, n, k)).astype(np.float32), saturate=True)
    return Fp8Tensor(codes=codes, scales=scales, tile=tile)


def quantize_fp8(w: np.ndarray, granularity: str = "tensor") -> Fp8Tensor:
    """fp16 weight (N, K) -> e4m3 codes with per-tensor, per-channel or 128x128 block fp32 scales."""
    w32 = check_fp16_matrix(w, "w")
    return quantize_tiles(w32, tile_shape(granularity, *w32.shape))


def quantize_fp8_tokens(x: np.ndarray) -> Fp8Tensor:
    """fp16 activations (M, K) -> e4m3 codes with one dynamic fp32 scale per token (row)."""
    x32 = check_fp16_matrix(x, "x")
    return quantize_tiles(x32, tile_shape("channel", *x32.shape), FP8_TOKEN_MIN_SCALE)


def dequantize_fp8(t: Fp8Tensor) -> np.ndarray:
    """float32 (N, K): fl(e4m3(q) * s), one rounding of the exact product."""
    n, k = t.codes.shape
    return (decode_e4m3(t.codes) * expand_tiles(t.scales, t.tile, n, k)).astype(np.float32)
