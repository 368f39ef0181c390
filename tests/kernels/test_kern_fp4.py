"""FP4 (NVFP4 / MXFP4) weight-only GEMV under the interpreter: the kernels' weights bit for bit
reference/fp4_quant.py's dequantize_fp4 (every code at every nibble position, block scales from the
smallest e4m3 subnormal to 448 and e8m0 codes 0..240), and the GEMV / GEMM within
reference/tolerance_fp.py's fp4_gemv_bound of the float64 model, as is the numba twin.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemv_fp4 import MX_MAX_CODE, dequant_fp4, fp4_weight_tensors, gemv_fp4, gemv_fp4_config
from mpsim.reference.fp4 import pack_fp4
from mpsim.reference.fp4_quant import FP4_BLOCK, Fp4Weight, dequantize_fp4, quantize_fp4
from mpsim.reference.gemv_fp4 import fp4_unscaled, gemv_fp4_ref
from mpsim.reference.tolerance import assert_close_bound
from mpsim.reference.tolerance_fp import fp4_gemv_bound
from mpsim.traces.recorder import Recorder

KINDS = ("nvfp4", "mxfp4")


def _every_code_weight(kind: str) -> Fp4Weight:
    """Rows that hold every e2m1 code at every nibble of a word, with every scale code of the kind's
    range (e4m3 0..0x7E but the NaN; e8m0 0..MX_MAX_CODE)."""
    b = FP4_BLOCK[kind]
    scale_codes = np.arange(0x7F if kind == "nvfp4" else MX_MAX_CODE + 1, dtype=np.uint8)
    n = len(scale_codes)
    k = 2 * b
    codes = (np.arange(n * k).reshape(n, k) * 7 + np.arange(n)[:, None]) % 16
    scales = np.stack([scale_codes, scale_codes[::-1]], axis=1).astype(np.uint8)
    g = np.float32(3.1e-3) if kind == "nvfp4" else np.float32(1)
    return Fp4Weight(packed=pack_fp4(codes.astype(np.uint8)), scales=scales, global_scale=g, kind=kind, k=k)


@pytest.mark.parametrize("kind", KINDS)
def test_dequant_bit_exact_every_code_and_scale(kind: str) -> None:
    fw = _every_code_weight(kind)
    qw, sc = fp4_weight_tensors(fw)
    got = dequant_fp4(qw, sc, float(fw.global_scale), kind=kind, k=fw.k).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), dequantize_fp4(fw).view(np.uint32))


@pytest.mark.parametrize("kind", KINDS)
def test_dequant_bit_exact_quantized_weights(kind: str) -> None:
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((19, 88)) * np.exp(rng.uniform(-12, 3, (19, 1)))).astype(np.float16)
    fw = quantize_fp4(w, kind)
    qw, sc = fp4_weight_tensors(fw)
    got = dequant_fp4(qw, sc, float(fw.global_scale), kind=kind, k=fw.k).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), dequantize_fp4(fw).view(np.uint32))


@pytest.mark.parametrize("m", [1, 7, 33])
@pytest.mark.parametrize("kind", KINDS)
def test_gemv_fp4_within_bound(kind: str, m: int) -> None:
    rng = np.random.default_rng(m)
    n, k = 45, 168  # N past a 32 tile; K = 168 pads to the block (176 / 192) and splits in 2
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-6, 2, (n, 1)))).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16) if m % 2 else None
    fw = quantize_fp4(w, kind)
    qw, sc = fp4_weight_tensors(fw)
    y = gemv_fp4(torch.from_numpy(x), qw, sc, float(fw.global_scale), kind=kind, k=k,
                 bias=None if bias is None else torch.from_numpy(bias)).numpy()
    v = fp4_unscaled(fw)
    g = float(fw.global_scale)
    model = x.astype(np.float64) @ (v.astype(np.float64) * g).T
    if bias is not None:
        model += bias.astype(np.float64)
    bound = fp4_gemv_bound(x, v, g, bias)
    assert_close_bound(y, model, bound, f"gemv_fp4 {kind} m={m}")
    twin = gemv_fp4_ref(x, fw, bias)
    assert_close_bound(twin, model, bound, f"gemv_fp4_ref {kind}")
    assert_close_bound(y, twin, 2 * bound, "kernel vs twin")
    if m == 33:  # the bound is tight enough to see a 0.1% scale error
        assert (np.abs(y - model * 1.001) > bound).any()


def test_gemv_fp4_records_and_checks() -> None:
    fw = quantize_fp4(np.ones((8, 32), np.float16), "nvfp4")
    qw, sc = fp4_weight_tensors(fw)
    x = torch.ones((1, 32), dtype=torch.float16)
    with Recorder() as rec:
        y = gemv_fp4(x, qw, sc, float(fw.global_scale), kind="nvfp4", k=32)
    assert torch.all(y == 32)
    rows = rec.finish()
    assert [(r["kernel"], r["w_format"], r["group_size"]) for r in rows] == [("gemv_fp4_kernel", "nvfp4", 16)]
    with pytest.raises(ValueError, match="global_scale"):
        gemv_fp4(x, qw, sc[:, :1].contiguous(), 2.0, kind="mxfp4", k=32)
    with pytest.raises(ValueError, match="kind"):
        gemv_fp4(x, qw, sc, 1.0, kind="fp4", k=32)
    with pytest.raises(ValueError, match="scales"):
        gemv_fp4(x, qw, sc[:, :1].contiguous(), 1.0, kind="nvfp4", k=32)
    bad = Fp4Weight(packed=fw.packed, scales=np.full((8, 1), 241, np.uint8), global_scale=np.float32(1),
                    kind="mxfp4", k=32)
    with pytest.raises(ValueError, match="241"):
        fp4_weight_tensors(bad)
    assert gemv_fp4_config(1, 8, 32, "mxfp4", on_gpu=False).block_m == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m", [1, 9])
def test_gemv_fp4_at_the_gpu_configs(kind: str, m: int) -> None:
    """The GPU's tiles (1 or 16 rows x 64 x 128, MXFP4 with rows 64 x 32, split K) under the interpreter."""
    rng = np.random.default_rng(m + 50)
    n, k = 100, 400
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    fw = quantize_fp4(w, kind)
    qw, sc = fp4_weight_tensors(fw)
    kp = qw.shape[1] * 8
    cfg = gemv_fp4_config(m, n, kp, kind, on_gpu=True)
    y = gemv_fp4(torch.from_numpy(x), qw, sc, float(fw.global_scale), kind=kind, k=k, config=cfg).numpy()
    v = fp4_unscaled(fw)
    bound = fp4_gemv_bound(x, v, float(fw.global_scale))
    assert_close_bound(y, gemv_fp4_ref(x, fw), 2 * bound, f"gemv_fp4 {kind} GPU config m={m}")
