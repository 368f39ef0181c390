"""mpsim's engine running issue 26's fp8 / fp4 weights on the references (mpsim/engine/float_weights.py):
the stored weight is exactly the reference's dequantized value, the activations are quantized as the
GEMM reads them, the GEMM is within the fp32-accumulation bound of the exact product of those, and
quality runs the policies on the tiny model; the fp8 KV cache's codes are the same on both backends
(the Triton backend against the references end to end: tests/engine/test_engine_tiny.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_cases import SMALL

from mpsim.engine.backends import make_backend
from mpsim.engine.float_weights import activations, float_linear_ref, quantize_float
from mpsim.engine.weights import dummy_weights
from mpsim.policy import parse_policy
from mpsim.quality.heldout import fp16_baseline, heldout_windows, measure_quality
from mpsim.reference.fp4_quant import dequantize_fp4, quantize_fp4
from mpsim.reference.fp8 import decode_e4m3
from mpsim.reference.fp8_quant import dequantize_fp8, quantize_fp8, quantize_fp8_tokens
from mpsim.reference.tolerance import assert_close_bound, gemm_bound


def _operands(seed: int, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = (rng.standard_t(4, (n, k)) * 0.05).astype(np.float16)
    return x, w, rng.standard_normal(n).astype(np.float16)


@pytest.mark.parametrize(("policy", "stored"), [
    ("fp8", lambda w: dequantize_fp8(quantize_fp8(w, "tensor"))),
    ("fp8grow", lambda w: dequantize_fp8(quantize_fp8(w, "channel"))),
    ("fp8b", lambda w: dequantize_fp8(quantize_fp8(w, "block"))),
    ("nvfp4", lambda w: dequantize_fp4(quantize_fp4(w, "nvfp4"))),
    ("mxfp4", lambda w: dequantize_fp4(quantize_fp4(w, "mxfp4"))),
])
def test_the_stored_weight_is_the_references_and_the_gemm_is_within_its_bound(policy: str,
                                                                              stored: object) -> None:
    x, w, bias = _operands(3, 7, 130, 256)
    choice = parse_policy(policy).weights_at("prefill", 0)
    fw = quantize_float(w, choice.w_format, choice.bits, choice.group_size)
    assert (fw.w_format, fw.bits, fw.group_size) == (choice.w_format, choice.bits, choice.group_size)
    assert np.array_equal(fw.w_hat, stored(w))  # type: ignore[operator]
    a = activations(x, choice.w_format)
    y = float_linear_ref(x, fw, bias)
    assert y.dtype == np.float16 and y.shape == (7, 130)
    exact = a.astype(np.float64) @ fw.w_hat.astype(np.float64).T + bias.astype(np.float64)
    assert_close_bound(y, exact, gemm_bound(a, fw.w_hat, bias), policy)


def test_w8a8_activations_are_per_token_e4m3_and_fp4_reads_16_bit() -> None:
    x, _, _ = _operands(5, 4, 1, 300)
    q = quantize_fp8_tokens(x)
    assert np.array_equal(activations(x, "fp8"), decode_e4m3(q.codes) * q.scales)
    block = activations(x, "fp8-block")  # each 1x128 group its own scale s = amax / 448
    for g in range(3):  # (the last group is partial: 44 values)
        part = x[:, g * 128:(g + 1) * 128].astype(np.float64)
        s = np.abs(part).max(axis=1, keepdims=True) / 448
        # e4m3 round-to-nearest: 2^-4 relative in the normal range, half the 2^-9 subnormal step
        # (times s) below it; the fp32 division and product add under 2^-22 relative
        bound = np.maximum(np.abs(part) * 2**-4, s * 2**-10) * (1 + 2**-20)
        assert (np.abs(block[:, g * 128:(g + 1) * 128] - part) <= bound).all()
    assert np.array_equal(activations(x, "nvfp4"), x.astype(np.float32))


def test_quality_runs_fp8_and_fp4_policies_on_the_references() -> None:
    params = dummy_weights(SMALL, seed=2)
    windows = heldout_windows(3, 24, seed=1)
    base = fp16_baseline(params, windows, 16, 8)
    for policy, bits in (("fp8", 8), ("fp8b", 8), ("nvfp4", 4), ("mxfp4", 4)):
        r = measure_quality(params, policy, None, windows, 16, 8, base)
        assert r.avg_bits_pmpd == r.avg_bits_mean == bits
        assert 0.0 < r.agreement_with_fp16 <= 1.0 and np.isfinite(r.bits_per_byte)


def test_the_fp8_kv_write_is_the_same_codes_on_both_backends() -> None:
    """The Triton write (one kv_fp8_quant launch over the stacked K and V heads, codes placed at each
    sequence's slots) and the reference write (kv_fp8_quant_ref) give the same cache bit for bit."""
    from mpsim.engine.backends import LayerCache
    from mpsim.engine.fp_ops import Fp8KV

    rng = np.random.default_rng(5)
    b, t, h, d, slots = 2, 3, 2, 32, 8
    k, v = (torch.from_numpy((rng.standard_normal((b, t, h, d)) * 60).astype(np.float16)) for _ in "kv")
    start, lens = torch.tensor([0, 4], dtype=torch.int32), torch.tensor([3, 2], dtype=torch.int32)
    caches = []
    for name in ("reference", "triton"):
        be = make_backend(name)
        c = LayerCache(*(Fp8KV.empty(b, h, slots, d, be.device) for _ in "kv"))
        be.kv_write(k.to(be.device), v.to(be.device), c, start.to(be.device), lens.to(be.device))
        caches.append(c)
    for ref, tri in ((caches[0].k, caches[1].k), (caches[0].v, caches[1].v)):
        assert torch.equal(ref.data, tri.data.cpu())
    assert not caches[0].k.data[1, :, 6:].any() and caches[0].k.data[1, :, 4:6].any()  # slots 4, 5 only
