"""Reference (numba) FP4 weight-only GEMV/GEMM, A16: the twin of kernels/gemv_fp4.py.

y[m, n] = fp16(fl(acc * g) + b[n]), acc = sum_k fl(x[m, k] v[n, k]) in fp32, k ascending, with
v = e2m1(q) S_b the exact unscaled weight (reference/fp4_quant.py: S_b = e4m3 block scale for NVFP4,
2^(c - 127) for MXFP4) and g the NVFP4 per-tensor scale (1 for MXFP4, so fl(acc * 1) = acc). The
kernel sums in another order and multiplies by g 2^14 after scaling v by 2^-14 (exact): both lie
within reference/tolerance_fp.py::fp4_gemv_bound of x @ (v g).T + b.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mpsim.reference.fp4 import decode_e2m1, unpack_fp4
from mpsim.reference.fp4_quant import Fp4Weight, block_scale_values
from mpsim.reference.fp16 import to_fp16, widen_bias


def fp4_unscaled(fw: Fp4Weight) -> np.ndarray:
    """float32 (N, K): v = e2m1(q) S_b, exact (the block scale only; no per-tensor g)."""
    q = decode_e2m1(unpack_fp4(fw.packed))
    s = np.repeat(block_scale_values(fw), fw.block, axis=1)
    return (q * s).astype(np.float32)[:, : fw.k]


@njit(cache=True)
def _gemv(x: np.ndarray, v: np.ndarray, g: np.float32, b: np.ndarray) -> np.ndarray:
    out = np.empty((x.shape[0], v.shape[0]), dtype=np.float32)
    for m in range(x.shape[0]):
        for n in range(v.shape[0]):
            acc = np.float32(0.0)
            for k in range(x.shape[1]):
                acc += x[m, k] * v[n, k]
            out[m, n] = np.float32(np.float32(acc * g) + b[n])
    return out


def gemv_fp4_ref(x: np.ndarray, fw: Fp4Weight, bias: np.ndarray | None = None) -> np.ndarray:
    """fp16 x (M, K) @ the FP4 weight (N, K), optional fp16 bias (N,) -> fp16 (M, N)."""
    x = np.asarray(x)
    if x.dtype != np.float16 or x.ndim != 2 or x.shape[1] != fw.k:
        raise ValueError(f"x: expected float16 (M, {fw.k}), got {x.dtype} {x.shape}")
    v = fp4_unscaled(fw)
    b, _ = widen_bias(bias, v.shape[0])
    return to_fp16(_gemv(x.astype(np.float32), v, np.float32(fw.global_scale), b))
