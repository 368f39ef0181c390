"""FP8 kernels under the interpreter: the e4m3 conversion and the per-token activation quantizer bit for
bit against reference/fp8.py and reference/fp8_quant.py (and the numba twin), and the W8A8 GEMM within
reference/tolerance_fp.py's w8a8_bound of the float64 model on the quantizers' codes and scales.

Under the interpreter the fp8 dot runs (Triton 3.9 interprets it in fp32 over the decoded values), so
the GEMM test runs the kernel's own tl.dot on float8e4nv operands; only the fp32 sum order differs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.kernels.fp8_act_quant import e4m3_sw, quantize_fp8_groups, quantize_fp8_tokens
from mpsim.kernels.gemm_fp8 import gemm_fp8, gemm_fp8_codes, gemm_fp8_config
from mpsim.kernels.gemm_fp8b import gemm_fp8b, gemm_fp8b_config
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.reference.fp8 import decode_e4m3, encode_e4m3
from mpsim.reference.fp8_quant import dequantize_fp8, quantize_fp8, quantize_tiles
from mpsim.reference.fp8_quant import quantize_fp8_tokens as quantize_tokens_ref
from mpsim.reference.gemm_fp8 import gemm_fp8_ref, gemm_fp8b_ref
from mpsim.reference.minifloat_numba import quantize_fp8_tokens_numba
from mpsim.reference.tolerance import assert_close_bound
from mpsim.reference.tolerance_fp import scaled_gemm_bound, w8a8_bound
from mpsim.traces.recorder import Recorder


@triton.jit
def _encode_kernel(x_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(q_ptr + offs, e4m3_sw(x), mask=offs < n)


def _encode(x32: np.ndarray) -> np.ndarray:
    q = torch.empty(x32.size, dtype=torch.uint8)
    _encode_kernel[(triton.cdiv(x32.size, 4096),)](torch.from_numpy(x32), q, x32.size, BLOCK=4096)
    return q.numpy()


def test_e4m3_sw_matches_the_reference_on_random_bits_and_edges() -> None:
    rng = np.random.default_rng(26)
    bits = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    # every e4m3 value, the midpoints between neighbours (ties to even), and the saturation edges
    vals = decode_e4m3(np.arange(256, dtype=np.uint8))
    fin = np.sort(vals[np.isfinite(vals)].astype(np.float64))
    mids = (fin[1:] + fin[:-1]) / 2
    edge = np.array([448, 449, 463.99, 464, 464.01, 480, 1e30, np.inf, -np.inf, np.nan, -np.nan,
                     0.0, -0.0, 2.0**-10, 3 * 2.0**-11, 2.0**-6, 2.0**-149, 1e-45], np.float64)
    nearby = np.concatenate([np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]).astype(np.float32)
    x = np.concatenate([bits.view(np.float32), fin.astype(np.float32), mids.astype(np.float32),
                        nearby, edge.astype(np.float32)])
    np.testing.assert_array_equal(_encode(x), encode_e4m3(x, saturate=True))


@pytest.mark.parametrize("shape", [(1, 7), (5, 300), (3, 128)])
def test_act_quant_bit_exact(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    mags = np.array([1.0, 300.0, 1e-4, 0.0, 6e4])[: shape[0]] if shape[0] > 1 else np.array([2.0])
    x = rng.standard_normal(shape) * np.resize(mags, shape[0])[:, None]
    x = np.clip(x, -65504, 65504).astype(np.float16)
    if shape[0] == 5:  # signed zeros, the fp16 extremes and subnormals inside one row
        x[1, :4] = [-0.0, 0.0, 6e-8, -6e-8]
        x[4, :2] = [65504, -65504]
    codes, scales = quantize_fp8_tokens(torch.from_numpy(x))
    ref = quantize_tokens_ref(x)
    twin = quantize_fp8_tokens_numba(x)
    for want in (ref, twin):
        np.testing.assert_array_equal(codes.numpy(), want.codes)
        np.testing.assert_array_equal(scales.numpy().view(np.uint32), want.scales[:, 0].view(np.uint32))


def test_act_quant_refuses_the_interpreters_cast() -> None:
    with pytest.raises(ValueError, match="hw_cvt=True"):
        quantize_fp8_tokens(torch.zeros((1, 8), dtype=torch.float16), hw_cvt=True)


def _operands(m: int, n: int, k: int, granularity: str, seed: int):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 3).astype(np.float16)
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-3, 1, (n, 1)))).astype(np.float16)
    wq = quantize_fp8(w, granularity)
    sw = wq.scales[:, 0].copy() if granularity == "channel" else wq.scales.reshape(1).copy()
    bias = rng.standard_normal(n).astype(np.float16)
    return x, wq.codes, sw, bias


@pytest.mark.parametrize("m", [1, 7, 16, 33])
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
def test_gemm_fp8_within_bound(m: int, granularity: str) -> None:
    n, k = 45, 160  # N past a 32 tile, K = 5 tiles of 32: the split-K path (split 2)
    x, wc, sw, bias = _operands(m, n, k, granularity, m)
    with_bias = m % 2 == 1
    b = bias if with_bias else None
    y = gemm_fp8(torch.from_numpy(x), torch.from_numpy(wc), torch.from_numpy(sw),
                 torch.from_numpy(bias) if with_bias else None).numpy()
    a = quantize_tokens_ref(x)
    sa = a.scales[:, 0]
    bound = w8a8_bound(decode_e4m3(a.codes), sa, decode_e4m3(wc), sw, b)
    model = (decode_e4m3(a.codes).astype(np.float64) * sa[:, None]) @ (
        decode_e4m3(wc).astype(np.float64) * sw[:, None]).T + (0 if b is None else b.astype(np.float64))
    assert_close_bound(y, model, bound, f"gemm_fp8 m={m} {granularity}")
    twin = gemm_fp8_ref(a.codes, sa, wc, sw, b)
    assert_close_bound(twin, model, bound, "gemm_fp8_ref")
    assert_close_bound(y, twin, 2 * bound, "kernel vs twin")


def test_gemm_fp8_one_split_and_record() -> None:
    m, n, k = 2, 33, 64
    x, wc, sw, _ = _operands(m, n, k, "tensor", 5)
    a = quantize_tokens_ref(x)
    cfg = gemm_fp8_config(m, n, k, on_gpu=False)
    assert cfg.split_k == 1
    with Recorder() as rec:
        y = gemm_fp8_codes(torch.from_numpy(a.codes), torch.from_numpy(a.scales[:, 0].copy()),
                           torch.from_numpy(wc), torch.from_numpy(sw)).numpy()
    bound = w8a8_bound(decode_e4m3(a.codes), a.scales[:, 0], decode_e4m3(wc), sw)
    assert_close_bound(y, gemm_fp8_ref(a.codes, a.scales[:, 0], wc, sw), 2 * bound, "one split")
    rows = rec.finish()
    assert [r["kernel"] for r in rows] == ["gemm_fp8_kernel"]
    assert rows[0]["a_dtype"] == "fp8-e4m3" and rows[0]["w_format"] == "fp8"


def test_gemm_fp8_bad_input() -> None:
    a = torch.zeros((2, 32), dtype=torch.uint8)
    sa = torch.ones(2)
    with pytest.raises(ValueError, match="w_scales"):
        gemm_fp8_codes(a, sa, torch.zeros((4, 32), dtype=torch.uint8), torch.ones(3))
    with pytest.raises(ValueError, match="w_codes"):
        gemm_fp8_codes(a, sa, torch.zeros((4, 16), dtype=torch.uint8), torch.ones(1))
    bad = LaunchConfig("gemm_fp8_kernel", (9, 1), 16, 32, 32, 4, 1, 1, group_m=8)
    with pytest.raises(ValueError, match="config"):
        gemm_fp8_codes(a, sa, torch.zeros((4, 32), dtype=torch.uint8), torch.ones(1), config=bad)


@pytest.mark.parametrize("m", [1, 16, 33])
def test_gemm_fp8b_within_bound(m: int) -> None:
    """128x128 weight blocks (N = 200: a partial block row; K = 300: a partial block column), 1x128
    activation groups quantized by the kernel bit for bit as the reference does."""
    n, k = 200, 300
    rng = np.random.default_rng(m + 100)
    x = (rng.standard_normal((m, k)) * np.exp(rng.uniform(-2, 2, (1, k)))).astype(np.float16)
    x[0, 128:256] = 0  # an all-zero group keeps scale 1
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-3, 1, (n, 1)))).astype(np.float16)
    wq = quantize_fp8(w, "block")
    bias = rng.standard_normal(n).astype(np.float16) if m != 16 else None
    a_codes, a_scales = quantize_fp8_groups(torch.from_numpy(x))
    ref = quantize_tiles(x.astype(np.float32), (1, 128))
    np.testing.assert_array_equal(a_codes.numpy(), ref.codes)
    np.testing.assert_array_equal(a_scales.numpy().view(np.uint32), ref.scales.view(np.uint32))
    y = gemm_fp8b(torch.from_numpy(x), torch.from_numpy(wq.codes), torch.from_numpy(wq.scales),
                  None if bias is None else torch.from_numpy(bias)).numpy()
    a_hat = dequantize_fp8(ref).astype(np.float64)
    w_hat = decode_e4m3(wq.codes).astype(np.float64) * np.repeat(np.repeat(wq.scales, 128, 0), 128, 1)[:n, :k]
    model = a_hat @ w_hat.T + (0 if bias is None else bias.astype(np.float64))
    bound = scaled_gemm_bound(a_hat, w_hat, bias)
    assert_close_bound(y, model, bound, f"gemm_fp8b m={m}")
    twin = gemm_fp8b_ref(ref.codes, ref.scales, wq.codes, wq.scales, bias)
    assert_close_bound(twin, model, bound, "gemm_fp8b_ref")
    assert_close_bound(y, twin, 2 * bound, "kernel vs twin")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 70), st.integers(0, 2**32 - 1))
def test_act_quant_bit_exact_on_random_fp16_bits(m: int, k: int, seed: int) -> None:
    """Rows of random finite fp16 bit patterns (subnormal, tiny and huge rows included)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**16, (m, k), dtype=np.uint32).astype(np.uint16)
    bits &= np.uint16(rng.choice([0x7FFF, 0x83FF, 0xBFFF]))  # all, subnormal-only, below 2 in magnitude
    x = bits.view(np.float16).copy()
    x[~np.isfinite(x)] = 0
    codes, scales = quantize_fp8_tokens(torch.from_numpy(x))
    ref = quantize_tokens_ref(x)
    np.testing.assert_array_equal(codes.numpy(), ref.codes)
    np.testing.assert_array_equal(scales.numpy().view(np.uint32), ref.scales[:, 0].view(np.uint32))


@pytest.mark.parametrize("m", [1, 20])
def test_gemm_fp8_at_the_gpu_configs(m: int) -> None:
    """The GPU's tiles (16 or 64 rows x 64 x 128, split K) under the interpreter: masks at partial
    tiles of N and K, and the fp8b kernel's 64 x 128 x 128 scale-block tiles."""
    n, k = 200, 384
    x, wc, sw, bias = _operands(m, n, k, "channel", m + 7)
    cfg = gemm_fp8_config(m, n, k, on_gpu=True)
    y = gemm_fp8(torch.from_numpy(x), torch.from_numpy(wc), torch.from_numpy(sw), torch.from_numpy(bias),
                 config=cfg).numpy()
    a = quantize_tokens_ref(x)
    sa = a.scales[:, 0]
    bound = w8a8_bound(decode_e4m3(a.codes), sa, decode_e4m3(wc), sw, bias)
    assert_close_bound(y, gemm_fp8_ref(a.codes, sa, wc, sw, bias), 2 * bound, f"gemm_fp8 GPU config m={m}")
    w = (np.random.default_rng(m).standard_normal((n, k)) * 0.05).astype(np.float16)
    wq = quantize_fp8(w, "block")
    cfg_b = gemm_fp8b_config(m, n, k, on_gpu=True)
    if cfg_b.block_m == 64:  # force the 64 x 128 x 128 tile the big shapes get
        cfg_b = LaunchConfig("gemm_fp8b_kernel", (cdiv(m, 64) * cdiv(n, 128), 1), 64, 128, 128, 8, 3, 1,
                             group_m=8)
    yb = gemm_fp8b(torch.from_numpy(x), torch.from_numpy(wq.codes), torch.from_numpy(wq.scales),
                   config=cfg_b).numpy()
    g = quantize_tiles(x.astype(np.float32), (1, 128))
    w_hat = decode_e4m3(wq.codes).astype(np.float64) * np.repeat(np.repeat(wq.scales, 128, 0), 128, 1)[:n, :k]
    bound_b = scaled_gemm_bound(dequantize_fp8(g).astype(np.float64), w_hat)
    assert_close_bound(yb, gemm_fp8b_ref(g.codes, g.scales, wq.codes, wq.scales), 2 * bound_b,
                       f"gemm_fp8b GPU config m={m}")
