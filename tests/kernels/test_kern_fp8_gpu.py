"""The fp8 / fp4 kernels on a GPU (skipped without CUDA; none has been lent yet, so these have not run).

- The hardware conversion (`cvt.rn.satfinite.e4m3x2.f32`, HW_CVT) against the integer one and the
  reference, bit for bit.
- The W8A8 GEMMs' data path exactly: codes of small integers (+-{0, 1, 2, 4}) and power-of-two scales
  keep every partial sum an integer below 2^11, exact in any accumulator of 12 or more bits, so the
  output equals the float64 result rounded to fp16 whatever Hopper's fp8 wgmma keeps (no bound on
  its narrow accumulator is assumed: none is documented).
- FP4 GEMV and fp8-KV decode within the fp32 bounds at U32_TRUNC (fp16 tensor-core operands).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kern_attn_cases import decode_expectation, decode_rescales

from mpsim.kernels.attention_decode_fp8 import attention_decode_fp8
from mpsim.kernels.fp8_act_quant import quantize_fp8_tokens
from mpsim.kernels.gemm_fp8 import gemm_fp8_codes
from mpsim.kernels.gemm_fp8b import gemm_fp8b_codes
from mpsim.kernels.gemv_fp4 import fp4_weight_tensors, gemv_fp4
from mpsim.kernels.launch_config import attention_decode_config
from mpsim.reference.attention_fp8kv import kv_fp8_quant_ref
from mpsim.reference.fp4_quant import quantize_fp4
from mpsim.reference.fp8 import decode_e4m3, encode_e4m3
from mpsim.reference.fp8_quant import quantize_fp8_tokens as quantize_tokens_ref
from mpsim.reference.gemv_fp4 import fp4_unscaled
from mpsim.reference.tolerance import U32_TRUNC, assert_close_bound
from mpsim.reference.tolerance_fp import fp4_gemv_bound

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CUDA = torch.device("cuda")
N_GEMM = 4096


def test_hardware_conversion_matches_the_reference() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 4096)) * np.exp(rng.uniform(-20, 10, (64, 1)))).clip(-65504, 65504)
    x = x.astype(np.float16)
    xt = torch.from_numpy(x).to(CUDA)
    hw = quantize_fp8_tokens(xt, hw_cvt=True)
    sw = quantize_fp8_tokens(xt, hw_cvt=False)
    ref = quantize_tokens_ref(x)
    for codes, scales in (hw, sw):
        np.testing.assert_array_equal(codes.cpu().numpy(), ref.codes)
        np.testing.assert_array_equal(scales.cpu().numpy().view(np.uint32), ref.scales[:, 0].view(np.uint32))


def _small_codes(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return encode_e4m3(rng.choice(np.array([0, 1, -1, 2, -2, 4, -4], np.float32), size=shape))


@pytest.mark.parametrize("m", [1, 16, 512])
def test_w8a8_gemms_exact_on_small_integers(m: int) -> None:
    n, k = N_GEMM, 1024  # |product| <= 16: a 128-wide slice sums to an integer <= 2^11, the total <= 2^14
    rng = np.random.default_rng(m)
    a, w = _small_codes(rng, (m, k)), _small_codes(rng, (n, k))
    sa = np.exp2(rng.integers(-4, 4, m)).astype(np.float32)
    sw = np.exp2(rng.integers(-4, 4, n)).astype(np.float32)
    a64, w64 = decode_e4m3(a).astype(np.float64), decode_e4m3(w).astype(np.float64)
    exact = (a64 * sa[:, None]) @ (w64 * sw[:, None]).T
    t = [torch.from_numpy(v).to(CUDA) for v in (a, sa, w, sw)]
    y = gemm_fp8_codes(*t).cpu().numpy()
    np.testing.assert_array_equal(y, exact.astype(np.float16))
    sab = np.repeat(sa[:, None], k // 128, axis=1)
    swb = np.exp2(rng.integers(-4, 4, (n // 128, k // 128))).astype(np.float32)
    exact_b = (a64 * np.repeat(sab, 128, 1)) @ (w64 * np.repeat(np.repeat(swb, 128, 0), 128, 1)).T
    yb = gemm_fp8b_codes(t[0], torch.from_numpy(sab).to(CUDA), t[2], torch.from_numpy(swb).to(CUDA))
    np.testing.assert_array_equal(yb.cpu().numpy(), exact_b.astype(np.float16))


@pytest.mark.parametrize("kind", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("m", [1, 16, 256])
def test_gemv_fp4_within_bound(kind: str, m: int) -> None:
    rng = np.random.default_rng(m)
    n, k = 4096, 4096
    w = (rng.standard_normal((n, k)) * 0.02).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    fw = quantize_fp4(w, kind)
    qw, sc = fp4_weight_tensors(fw, CUDA)
    y = gemv_fp4(torch.from_numpy(x).to(CUDA), qw, sc, float(fw.global_scale), kind=kind, k=k).cpu().numpy()
    v = fp4_unscaled(fw)
    g = float(fw.global_scale)
    model = x.astype(np.float64) @ (v.astype(np.float64) * g).T
    assert_close_bound(y, model, fp4_gemv_bound(x, v, g, u=U32_TRUNC), f"gemv_fp4 {kind} m={m}")


def test_decode_fp8_within_bound_and_repeatable() -> None:
    """Real shapes (32 heads, head_dim 128, KV 4096, 16 splits): within attention_bound at U32_TRUNC
    (the CPU test's folded-V allowance), and two launches give identical bits."""
    rng = np.random.default_rng(1)
    b, h, t, d = 2, 32, 4096, 128
    k = rng.standard_normal((b, t, h, d)).astype(np.float16)
    v = rng.standard_normal((b, t, h, d)).astype(np.float16)
    ks = np.full(h, np.abs(k).max() / 448, np.float32)
    vs = np.full(h, np.abs(v).max() / 448, np.float32)
    kc = torch.from_numpy(kv_fp8_quant_ref(k, ks).transpose(0, 2, 1, 3).copy()).to(CUDA)
    vc = torch.from_numpy(kv_fp8_quant_ref(v, vs).transpose(0, 2, 1, 3).copy()).to(CUDA)
    q = torch.from_numpy(rng.standard_normal((b, h, d)).astype(np.float16)).to(CUDA)
    lens = torch.tensor([t, t - 77], dtype=torch.int32, device=CUDA)
    args = (q, kc, vc, torch.from_numpy(ks).to(CUDA), torch.from_numpy(vs).to(CUDA), lens)
    o1 = attention_decode_fp8(*args, max_kv_len=t)
    o2 = attention_decode_fp8(*args, max_kv_len=t)
    assert torch.equal(o1, o2)
    cfg = attention_decode_config(b, h, h, d, t, 8, None)
    k_hat = decode_e4m3(kc.cpu().numpy()).astype(np.float64) * ks[None, :, None, None]
    v_hat = decode_e4m3(vc.cpu().numpy()).astype(np.float64) * vs[None, :, None, None]
    v_parts = (np.abs(v_hat), np.ones(v_hat.shape[:3]), np.zeros(v_hat.shape[:3]))
    exact, bound = decode_expectation(q.cpu().numpy(), k_hat, v_hat, [t, t - 77], float(np.float32(d**-0.5)),
                                      False, decode_rescales(cfg, t), U32_TRUNC, v_parts=v_parts)
    assert_close_bound(o1.cpu().numpy(), exact, bound, "attention_decode_fp8 on the GPU")
