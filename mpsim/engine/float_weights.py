"""fp8 / fp4 decoder-block linears in mpsim's engine: the stored weights, and the references'
linear (issue 26 point 5; the Triton backend runs mpsim's fp8 / fp4 kernels on the stored codes:
mpsim/engine/fp_ops.py).

A `FloatWeight` holds the weight as the format stores it, dequantized once (reference/fp8_quant.py,
fp4_quant.py: x_hat = the stored value, exactly as the kernels read it): `fp8` per tensor (group
None) or per output row (0), `fp8-block` 128x128, `nvfp4`, `mxfp4`. `float_linear_ref` computes
y = a_hat @ w_hat.T + bias with reference/gemm_fp16.py's fp32 accumulation (k ascending, one
rounding to fp16), where a_hat is the activation as the GEMM reads it: W8A8 (`fp8`) quantizes each
token's row dynamically (vLLM's per-token rule, reference quantize_fp8_tokens), `fp8-block` each
1x128 group of a row (DeepGEMM's input; an all-zero group keeps scale 1), and the FP4 formats read
16-bit activations (W4A16: the weight error alone; the A4 activation error of Blackwell's NVFP4
GEMMs is not included). The GEMM is computed at the dequantized level (every operand one rounding of
its exact stored value, fp32 products and sums), not with the kernels' integer-code products and
scale epilogue: the two differ by fp32 rounding only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpsim.kernels.gemm import Weight
from mpsim.reference.fp4_quant import Fp4Weight, dequantize_fp4, quantize_fp4
from mpsim.reference.fp8_quant import (
    FP8_BLOCK,
    Fp8Tensor,
    dequantize_fp8,
    quantize_fp8,
    quantize_fp8_tokens,
    quantize_tiles,
)
from mpsim.reference.fp16 import to_fp16, widen, widen_bias
from mpsim.reference.gemm_common import prepare_x
from mpsim.reference.gemm_fp16 import gemm_f32

FLOAT_W_FORMATS = ("fp8", "fp8-block", "nvfp4", "mxfp4")


@dataclass(frozen=True)
class FloatWeight:
    """An fp8 / fp4 weight (N, K), dequantized once (float32 holding the stored values)."""

    w_format: str
    bits: int
    group_size: int | None
    w_hat: np.ndarray  # float32 (N, K)
    stored: Fp8Tensor | Fp4Weight | None = None  # the codes and scales (the Triton kernels' input)

    @property
    def out_features(self) -> int:
        return int(self.w_hat.shape[0])

    @property
    def in_features(self) -> int:
        return int(self.w_hat.shape[1])


def quantize_float(w: np.ndarray, w_format: str, bits: int, group_size: int | None) -> FloatWeight:
    """An fp16 weight (N, K) stored in `w_format` (traces/schema.py names; fp8 group None per
    tensor, 0 per row)."""
    w16 = np.asarray(w, dtype=np.float16)
    if w_format == "fp8":
        stored: Fp8Tensor | Fp4Weight = quantize_fp8(w16, "tensor" if group_size is None else "channel")
    elif w_format == "fp8-block":
        stored = quantize_fp8(w16, "block")
    elif w_format in ("nvfp4", "mxfp4"):
        stored = quantize_fp4(w16, w_format)
    else:
        raise ValueError(f"not a floating-point weight format: {w_format!r}; expected one of "
                         f"{list(FLOAT_W_FORMATS)}")
    w_hat = dequantize_fp4(stored) if isinstance(stored, Fp4Weight) else dequantize_fp8(stored)
    return FloatWeight(w_format, bits, group_size, np.ascontiguousarray(w_hat, dtype=np.float32), stored)


def activations(x: np.ndarray, w_format: str) -> np.ndarray:
    """fp16 activations (M, K) as the GEMM of `w_format` reads them, float32."""
    x32 = widen(x, "x", 2)
    if w_format == "fp8":
        return dequantize_fp8(quantize_fp8_tokens(x32.astype(np.float16)))
    if w_format == "fp8-block":
        return dequantize_fp8(quantize_tiles(x32, (1, FP8_BLOCK)))
    return x32


def float_linear_ref(x: np.ndarray, w: FloatWeight, bias: np.ndarray | None = None) -> np.ndarray:
    """fp16 x (M, K) -> fp16 y (M, N) = a_hat @ w_hat.T + bias (fp32 accumulation, one rounding)."""
    a = activations(x, w.w_format)
    b32, _ = widen_bias(bias, w.out_features)
    return to_fp16(gemm_f32(prepare_x(a, w.in_features), w.w_hat, b32))


EngineWeight = Weight | FloatWeight  # what the engine's backends take (kernels/gemm.py's, or these)
