"""The one-row group GEMV with fp16 partial sums (kernels/gemv_group.py), on the CPU interpreter.

Outputs within reference/tolerance.py::gemv_partial_bound of the float64 product of x and the exact
W_hat, and within twice that of the numba twin (reference/gemv_group.py), at every width that takes
the partial sums, with split-K, a bias, and activations at the top of the fp16 range.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm_group import gemm_group
from mpsim.kernels.launch_config import (
    LaunchConfig,
    cdiv,
    gemm_candidates,
    gemm_config,
    gemv_k_unit,
    gemv_partial_trips,
)
from mpsim.reference.exact import gemm_float64
from mpsim.reference.gemv_group import gemv_group_partial_ref
from mpsim.reference.group_quant import GroupQuantWeight, dequantize_group, quantize_group
from mpsim.reference.packing import pack_codes
from mpsim.reference.tolerance import assert_close_bound, gemv_partial_bound

BITS = (4, 3, 2)


def _run(gw: GroupQuantWeight, x: np.ndarray, bias: np.ndarray | None = None,
         config: LaunchConfig | None = None) -> np.ndarray:
    tb = None if bias is None else torch.from_numpy(bias)
    return gemm_group(torch.from_numpy(x), torch.from_numpy(gw.qweight), torch.from_numpy(gw.scales),
                      torch.from_numpy(gw.zeros), bits=gw.bits, group_size=gw.group_size, bias=tb,
                      config=config).numpy()


def _bound(gw: GroupQuantWeight, x: np.ndarray, trips: int, bias: np.ndarray | None = None) -> np.ndarray:
    s_k = np.repeat(gw.scales.astype(np.float64), gw.group_size, axis=1)[:, :gw.k]
    return gemv_partial_bound(x, dequantize_group(gw), s_k, gw.bits, trips, bias)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize(("n", "k", "group"), [(70, 500, 128), (33, 256, 64)])
def test_within_the_partial_bound_and_of_the_twin(bits: int, n: int, k: int, group: int) -> None:
    rng = np.random.default_rng(bits * k)
    gw = quantize_group(rng.standard_normal((n, k)).astype(np.float16), bits, group)
    x = (3 * rng.standard_normal((1, k))).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    cfg = gemm_config(1, n, k, f"int{bits}-group", bits, group, on_gpu=False)
    trips = gemv_partial_trips(bits, group, 1, cfg.block_k or 1)
    assert trips == group // 32 and cfg.block_k == 32  # the CPU config takes the partial sums
    y = _run(gw, x, bias)
    bound = _bound(gw, x, trips, bias)
    assert_close_bound(y, gemm_float64(x, dequantize_group(gw), bias), bound, f"int{bits} G={group}")
    twin = gemv_group_partial_ref(x, gw.qweight, gw.scales, gw.zeros, bits, group, k, 32, trips, bias)
    assert_close_bound(y, twin.astype(np.float64), 2 * bound, f"int{bits} twin")


@pytest.mark.parametrize("split_k", (2, 3))
def test_split_k_starts_on_runs_and_is_deterministic(split_k: int) -> None:
    """K = 768 is six runs of 4 x 32 columns: splits of 3 and 2 runs (and 128-column groups)."""
    rng = np.random.default_rng(split_k)
    n, k = 40, 768
    gw = quantize_group(rng.standard_normal((n, k)).astype(np.float16), 4, 128)
    x = rng.standard_normal((1, k)).astype(np.float16)
    cfg = LaunchConfig("gemv_group_kernel", (cdiv(n, 32), split_k), 1, 32, 32, 4, 1, split_k)
    first, again = _run(gw, x, config=cfg), _run(gw, x, config=cfg)
    assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    assert_close_bound(first, gemm_float64(x, dequantize_group(gw)), _bound(gw, x, 4), "split")


@pytest.mark.parametrize("bits", BITS)
def test_activations_at_the_fp16_maximum_do_not_overflow_the_partial_sums(bits: int) -> None:
    """Four x = 65504 meet the largest |q - z| in one lane's run: 4 (2^b - 1) 65504 overflows fp16
    unless the partial sums are scaled by 2^-E (E = ceil(log2(4 (2^b - 1))))."""
    n, k, group = 8, 128, 128
    top = (1 << bits) - 1
    codes = np.full((n, k), top, dtype=np.uint8)
    gw = GroupQuantWeight(pack_codes(codes, bits), np.full((n, 1), 2.0**-8, np.float16),
                          np.zeros((n, 1), np.float16), bits, group, k, n)
    x = np.zeros((1, k), dtype=np.float16)
    x[0, 5::32] = 65504.0  # lane 5 of each of the run's four 32-column tiles
    y = _run(gw, x)
    assert np.all(np.isfinite(y))
    assert_close_bound(y, gemm_float64(x, dequantize_group(gw)), _bound(gw, x, 4), "top")


def test_launch_configs_of_the_partial_sums() -> None:
    """One row at <= 4 bits: 256 x 32 tiles, four K tiles per run, splits on run edges; 8 bits and
    more rows keep the exact-W_hat loop (T = 1)."""
    for bits in BITS:
        cfg = gemm_config(1, 4096, 4096, f"int{bits}-group", bits, 128)
        assert (cfg.block_n, cfg.block_k) == (256, 32)
        assert gemv_partial_trips(bits, 128, 1, 32) == 4
        assert gemv_k_unit("group", bits, 128, 1, 32) == 128
        for c in gemm_candidates(1, 4096, 4096, f"int{bits}-group", bits, 128):
            unit = gemv_k_unit("group", bits, 128, c.block_m, c.block_k or 1)
            per = cdiv(cdiv(4096, c.split_k), unit) * unit
            assert cdiv(4096, per) == c.split_k, c  # no empty split
    assert gemv_partial_trips(8, 128, 1, 32) == 1
    assert gemv_partial_trips(4, 128, 2, 32) == 1
    assert gemv_partial_trips(4, 128, 1, 128) == 1
    assert gemv_partial_trips(4, 64, 1, 32) == 2
    assert gemv_partial_trips(4, 96, 1, 32) == 1  # three tiles: no run of 2 or 4 fits


@pytest.mark.parametrize("bits", BITS)
def test_the_sm80_pair_swap_sums_the_same_products(bits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """PAIR_SWAP (an sm_80 device: kernels/gemv_group.py pair_swap) swaps each 4-bit code pair's
    halves and x's column pairs alike: the same products and partial sums, lane c holding weight
    c ^ 1's. Here bit for bit (the interpreter's fp32 row sum adds lanes c and c ^ 1 first, which
    commutes); a GPU's row sum may add the lanes in another order, within the same bound."""
    import mpsim.kernels.gemm_group as gg
    from mpsim.kernels.gemv_group import pair_swap

    assert pair_swap((8, 0)) and not pair_swap((9, 0)) and not pair_swap((8, 6))
    assert not pair_swap(None)
    rng = np.random.default_rng(80 + bits)
    n, k = 40, 512
    gw = quantize_group(rng.standard_normal((n, k)).astype(np.float16), bits, 128)
    x = (3 * rng.standard_normal((1, k))).astype(np.float16)
    plain = _run(gw, x)
    monkeypatch.setattr(gg, "pair_swap", lambda capability: True)
    swapped = _run(gw, x)
    assert_close_bound(swapped, gemm_float64(x, dequantize_group(gw)), _bound(gw, x, 4), "swap")
    assert np.array_equal(swapped.view(np.uint16), plain.view(np.uint16))
