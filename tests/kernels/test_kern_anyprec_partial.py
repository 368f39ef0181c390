"""The one-row any-precision GEMV with fp16 partial sums (kernels/gemv_anyprec.py), on the CPU interpreter.

Outputs within reference/tolerance.py::gemv_pair_partial_bound of the float64 product of x and the
exact LUT values, and within twice that of the numba twin (reference/gemm_anyprec.py), at 2 and 3
bits, with and without the x scale (E > 0 and E = 0), split-K, a bias, and activations at the top of
the fp16 range; the launch configs run whole runs of T K tiles per split.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import AnyPrecWeight, linear
from mpsim.kernels.gemm_anyprec import MAX_PAIR_EXP, gemm_anyprec, pair_exp, pair_table
from mpsim.kernels.launch_config import (
    ANYPREC_PARTIAL_TRIPS,
    LaunchConfig,
    cdiv,
    gemm_candidates,
    gemm_config,
    gemv_k_unit,
    gemv_trips,
)
from mpsim.kernels.table_rows import rows_aligned
from mpsim.reference.anyprec import AnyPrecWeight as RefWeight
from mpsim.reference.anyprec import codes_to_planes, dequantize_anyprec, quantize_anyprec
from mpsim.reference.anyprec import pair_exp as ref_pair_exp
from mpsim.reference.exact import gemm_float64
from mpsim.reference.gemm_anyprec import gemv_anyprec_partial_ref
from mpsim.reference.tolerance import assert_close_bound, gemv_pair_partial_bound

T = ANYPREC_PARTIAL_TRIPS


def _weight(apw: RefWeight, bits: int) -> AnyPrecWeight:
    return AnyPrecWeight(torch.from_numpy(apw.qweight),
                         {b: torch.from_numpy(t) for b, t in apw.luts.items()}, bits, apw.k)


def _run(weight: AnyPrecWeight, x: np.ndarray, bias: np.ndarray | None = None,
         config: LaunchConfig | None = None) -> np.ndarray:
    tb = None if bias is None else torch.from_numpy(bias)
    return linear(torch.from_numpy(x), weight, tb, config=config).numpy()


@pytest.mark.parametrize("bits", (3, 2))
@pytest.mark.parametrize(("n", "k", "scale"), [(70, 500, 1.0), (33, 256, 0.02), (40, 96, 300.0)])
def test_within_the_partial_bound_and_of_the_twin(bits: int, n: int, k: int, scale: float) -> None:
    """scale 0.02: every |lut| <= 1/4, E = 0 (x used as it is); 1 and 300: E > 0 (x scaled down)."""
    rng = np.random.default_rng(bits * k)
    apw = quantize_anyprec((scale * rng.standard_normal((n, k))).astype(np.float16), 4, 2)
    weight = _weight(apw, bits)
    assert weight.pair_exps is not None
    e = weight.pair_exps[bits]
    assert (e == 0) == (scale < 0.1)
    x = (3 * rng.standard_normal((1, k))).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    cfg = gemm_config(1, n, k, "anyprec", bits, None, on_gpu=False)
    assert gemv_trips("anyprec", bits, None, 1, cfg.block_k or 1) == T and cfg.block_k == 32
    y = _run(weight, x, bias)
    w_hat = dequantize_anyprec(apw, bits)
    bound = gemv_pair_partial_bound(x, w_hat, e, T, bias)
    assert_close_bound(y, gemm_float64(x, w_hat, bias), bound, f"ap{bits} x{scale}")
    twin = gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[bits], bits, k, 32, T, bias)
    assert_close_bound(y, twin.astype(np.float64), 2 * bound, f"ap{bits} twin")


@pytest.mark.parametrize("split_k", (2, 3))
def test_split_k_starts_on_runs_and_is_deterministic(split_k: int) -> None:
    """K = 768 is six runs of 4 x 32 columns: splits of 3 and 2 runs."""
    rng = np.random.default_rng(split_k)
    n, k = 40, 768
    apw = quantize_anyprec(rng.standard_normal((n, k)).astype(np.float16), 4, 2)
    weight = _weight(apw, 3)
    x = rng.standard_normal((1, k)).astype(np.float16)
    cfg = LaunchConfig("gemv_anyprec_kernel", (cdiv(n, 32), split_k), 1, 32, 32, 4, 1, split_k)
    first, again = _run(weight, x, config=cfg), _run(weight, x, config=cfg)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    assert weight.pair_exps is not None
    bound = gemv_pair_partial_bound(x, dequantize_anyprec(apw, 3), weight.pair_exps[3], T)
    assert_close_bound(first, gemm_float64(x, dequantize_anyprec(apw, 3)), bound, "split")


@pytest.mark.parametrize("bits", (3, 2))
def test_activations_at_the_fp16_maximum_do_not_overflow_the_partial_sums(bits: int) -> None:
    """Four x = 65504 meet the LUT's largest value (1.5, so E = 3) in one lane's run, four -65504 in
    the next lane's: each run's 4 x 1.5 x 65504 overflows fp16 (inf - inf: NaN) unless x is scaled by
    2^-E; the product itself is 0."""
    n, k = 8, 128
    codes = np.full((n, k), (1 << bits) - 1, dtype=np.uint8)
    luts = {b: np.tile(np.linspace(-1.0, 1.5, 1 << b).astype(np.float16), (n, 1)) for b in (2, 3)}
    apw = RefWeight(codes_to_planes(codes << (3 - bits), 3), luts, 3, 2, k, n)
    weight = _weight(apw, bits)
    assert weight.pair_exps is not None and weight.pair_exps[bits] == 3
    x = np.zeros((1, k), dtype=np.float16)
    x[0, 5::32] = 65504.0  # lane 5 of each of the run's four 32-column tiles
    x[0, 6::32] = -65504.0
    y = _run(weight, x)
    assert np.all(y == 0)
    w_hat = dequantize_anyprec(apw, bits)
    assert_close_bound(y, gemm_float64(x, w_hat), gemv_pair_partial_bound(x, w_hat, 3, T), "top")


def test_pair_exp_is_the_smallest_safe_power_and_agrees_with_the_reference() -> None:
    """E = max(0, ceil(log2(T max |lut|))): T max |lut| an exact power of two keeps it, one fp16
    step above goes up; the kernels' (from the pair table) and the reference's (from the LUT) agree."""
    above = float(np.nextafter(np.float16(0.25), np.float16(1)))
    for top, want in [(0.0, 0), (0.25, 0), (above, 1), (0.5, 1), (1.0, 2), (1.5, 3), (65504.0, 18)]:
        lut = np.array([[-top, top / 8]], dtype=np.float16)
        assert ref_pair_exp(lut, T) == want, top
        assert pair_exp(pair_table(torch.from_numpy(lut))) == want, top
    assert MAX_PAIR_EXP == 18
    with pytest.raises(ValueError, match="finite"):
        ref_pair_exp(np.array([[np.inf, 0]], np.float16), T)
    with pytest.raises(ValueError, match="finite"):
        pair_exp(pair_table(torch.tensor([[float("nan"), 0.0]], dtype=torch.float16)))


def test_one_row_needs_its_pair_exp() -> None:
    rng = np.random.default_rng(5)
    apw = quantize_anyprec(rng.standard_normal((16, 64)).astype(np.float16), 4, 2)
    lut = rows_aligned(torch.from_numpy(apw.luts[3]))
    x = torch.from_numpy(rng.standard_normal((1, 64)).astype(np.float16))
    qw = torch.from_numpy(apw.qweight)
    for bad in (None, -1, MAX_PAIR_EXP + 1, 2.0, True):
        with pytest.raises(ValueError, match="pair_exp"):
            gemm_anyprec(x, qw, lut, bits=3, pairs=pair_table(lut), pair_exp=bad)  # type: ignore[arg-type]
    x2 = torch.from_numpy(rng.standard_normal((2, 64)).astype(np.float16))
    assert gemm_anyprec(x2, qw, lut, bits=3, pairs=pair_table(lut)).shape == (2, 16)  # no 1-row loop


def test_launch_configs_of_the_partial_sums() -> None:
    """One row at <= 3 bits: 256 x 32 tiles, four K tiles per run, splits on run edges; 4 bits and
    more rows keep the fp32 loop (T = 1)."""
    for bits in (3, 2):
        cfg = gemm_config(1, 4096, 11008, "anyprec", bits, None)
        assert (cfg.block_n, cfg.block_k) == (256, 32)
        assert gemv_k_unit("anyprec", bits, None, 1, 32) == 128
        for c in gemm_candidates(1, 4096, 11008, "anyprec", bits, None):
            unit = gemv_k_unit("anyprec", bits, None, c.block_m or 1, c.block_k or 1)
            per = cdiv(cdiv(11008, c.split_k), unit) * unit
            assert cdiv(11008, per) == c.split_k, c  # no empty split
    assert gemv_trips("anyprec", 4, None, 1, 32) == 1
    assert gemv_trips("anyprec", 3, None, 2, 32) == 1
