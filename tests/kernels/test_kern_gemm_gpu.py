"""GEMM kernels compiled for a real GPU at real 7B shapes (skipped without CUDA).

Weights are random packed words, scales, zeros, bit-planes and LUTs (any bit pattern is a valid
weight), so no slow quantization runs: the exact parts are checked against the numpy reference's
unpacking on the CPU, the products against the float64 model within the tensor-core bound
(U32_TRUNC: some MMA accumulators truncate), or with one activation row the larger of it and the
fp16 partial sums' bound where a config may take them (group <= 4 bits, any-precision <= 3 bits).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import AnyPrecWeight, Fp16Weight, GroupWeight, Weight, linear
from mpsim.kernels.gemm_anyprec import dequant_anyprec
from mpsim.kernels.gemm_group import dequant_group
from mpsim.reference.anyprec import planes_to_codes
from mpsim.reference.exact import gemm_float64
from mpsim.reference.group_quant import dequantize_codes
from mpsim.reference.packing import unpack_codes
from mpsim.reference.tolerance import (
    U32_TRUNC,
    assert_close_bound,
    gemm_bound,
    gemv_pair_partial_bound,
    gemv_partial_bound,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]
# ap3s: any-precision 3 bits with LUT values near 1 (pair_exp > 0: the one-row GEMV scales x, X_SCALED)
FORMATS = ("fp16", "int8", "int4", "int3", "int2", "ap4", "ap3", "ap2", "ap3s")
GROUP = 128
DEVICE = "cuda"


def random_weight(fmt: str, n: int, k: int, gen: torch.Generator) -> tuple[Weight, torch.Tensor]:
    """A container with random contents and its W_hat from the kernel's exact-parts entry point."""
    dev = torch.device(DEVICE)
    if fmt == "fp16":
        w = (torch.randn(n, k, generator=gen, device=dev) * 0.02).half()
        return Fp16Weight(w), w
    if fmt.startswith("int"):
        bits = int(fmt[3:])
        q = torch.randint(-(2**31), 2**31, (n, k * bits // 32), generator=gen, device=dev,
                          dtype=torch.int32)
        s = (torch.rand(n, k // GROUP, generator=gen, device=dev) * 0.01 + 1e-3).half()
        z = torch.randint(0, 1 << bits, (n, k // GROUP), generator=gen, device=dev).half()
        return GroupWeight(q, s, z, bits, GROUP, k), dequant_group(q, s, z, k=k, bits=bits,
                                                                  group_size=GROUP)
    bits, parent, scale = int(fmt[2]), 4, 1.0 if fmt.endswith("s") else 0.02
    planes = torch.randint(-(2**31), 2**31, (parent, n, k // 32), generator=gen, device=dev,
                           dtype=torch.int32)
    luts = {b: (torch.randn(n, 1 << b, generator=gen, device=dev) * scale).half()
            for b in range(2, parent + 1)}
    apw = AnyPrecWeight(planes, luts, bits, k)
    assert apw.pair_exps is not None and (apw.pair_exps.get(3, 0) > 0) == fmt.endswith("s")
    return apw, dequant_anyprec(planes, luts[bits], k=k, bits=bits)


def reference_w_hat(weight: Weight) -> np.ndarray:
    """The numpy reference's dequantization of the same stored bits."""
    if isinstance(weight, Fp16Weight):
        return weight.weight.cpu().numpy()
    if isinstance(weight, GroupWeight):
        codes = unpack_codes(weight.qweight.cpu().numpy(), weight.bits, weight.in_features)
        return dequantize_codes(codes, weight.scales.cpu().numpy(), weight.zeros.cpu().numpy(),
                                weight.group_size)
    codes = planes_to_codes(weight.qweight.cpu().numpy(), weight.bits, weight.in_features)
    lut = weight.luts[weight.bits].cpu().numpy()
    return np.take_along_axis(lut, codes.astype(np.intp), axis=1)


def product_bound(weight: Weight, xn: np.ndarray, w_ref: np.ndarray,
                  bn: np.ndarray | None = None) -> np.ndarray:
    """gemm_bound (U32_TRUNC), or with one row at most the fp16 partial sums' (T = 4, the larger)."""
    bound = gemm_bound(xn, w_ref, bn, U32_TRUNC)
    if xn.shape[0] != 1:
        return bound
    if isinstance(weight, GroupWeight) and weight.bits <= 4:
        s_k = np.repeat(weight.scales.cpu().numpy().astype(np.float64), weight.group_size, axis=1)
        bound = np.maximum(bound, gemv_partial_bound(xn, w_ref, s_k[:, :xn.shape[1]], weight.bits,
                                                     4, bn))
    if isinstance(weight, AnyPrecWeight) and weight.bits <= 3:
        assert weight.pair_exps is not None
        bound = np.maximum(bound, gemv_pair_partial_bound(xn, w_ref, weight.pair_exps[weight.bits],
                                                          4, bn))
    return bound


@pytest.mark.parametrize(("n", "k"), SHAPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_real_shapes_exact_dequant_and_bounded_products(fmt: str, n: int, k: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPSIM_AUTOTUNE", "0")  # the heuristic here; every candidate below
    gen = torch.Generator(device=DEVICE).manual_seed(n + k)
    weight, w_hat = random_weight(fmt, n, k, gen)
    w_ref = reference_w_hat(weight)
    np.testing.assert_array_equal(w_hat.cpu().numpy().view(np.uint16), w_ref.view(np.uint16))
    for m in (1, 16, 64):  # GEMV, GEMV via tl.dot, tiled GEMM
        x = torch.randn(m, k, generator=gen, device=DEVICE).half()
        bias = torch.randn(n, generator=gen, device=DEVICE).half()
        y = linear(x, weight, bias).cpu().numpy()
        xn, bn = x.cpu().numpy(), bias.cpu().numpy()
        assert_close_bound(y, gemm_float64(xn, w_ref, bn), product_bound(weight, xn, w_ref, bn),
                           f"{fmt} {m}x{n}x{k}")


def test_split_k_workspace_is_reused_across_calls() -> None:
    """Same output bits on every call: the last-arriving program resets its tile counter to 0."""
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    weight, _ = random_weight("int4", 4096, 4096, gen)
    x = torch.randn(1, 4096, generator=gen, device=DEVICE).half()
    first = linear(x, weight)
    for _ in range(20):
        assert torch.equal(linear(x, weight), first)


@pytest.mark.parametrize("fmt", ["fp16", "int4", "int3"])  # each candidate compiles (~1 s each)
@pytest.mark.parametrize("m", [1, 16])
def test_every_autotune_candidate_is_right_and_the_tuned_launch_records_one(
        fmt: str, m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each config of the device's candidate set computes the same bounded product; autotuning
    then picks one of them, and a capture records that one launch only."""
    from mpsim.kernels import autotune
    from mpsim.kernels.launch_config import gemm_candidates
    from mpsim.traces.recorder import Recorder

    n = k = 4096
    gen = torch.Generator(device=DEVICE).manual_seed(m)
    weight, _ = random_weight(fmt, n, k, gen)
    w_ref = reference_w_hat(weight)
    x = torch.randn(m, k, generator=gen, device=DEVICE).half()
    xn = x.cpu().numpy()
    want, bound = gemm_float64(xn, w_ref), product_bound(weight, xn, w_ref)
    arch = autotune.gpu_arch(torch.cuda.get_device_capability())
    for cfg in gemm_candidates(m, n, k, weight.w_format, weight.bits, weight.group_size, arch):
        y = linear(x, weight, config=cfg).cpu().numpy()
        assert_close_bound(y, want, bound, f"{fmt} m={m} {cfg.config_dict()}")
    monkeypatch.setenv("MPSIM_AUTOTUNE", "1")
    with Recorder() as rec:
        y = linear(x, weight).cpu().numpy()
    rows = rec.finish()
    assert len(rows) == 1
    assert_close_bound(y, want, bound, f"{fmt} m={m} tuned")
