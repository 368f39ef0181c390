"""GEMV/GEMM kernels (interpreter on CPU): every weight format at awkward shapes, within the fp32 bound.

Each output is compared with the float64 product of x and the reference's dequantized weight W_hat,
within reference/tolerance.py's gemm_bound (from |x|, |W_hat| and K): the dequantization itself is
exact (tests/kernels/test_kern_gemm_exact.py), so only the fp32 summation order may differ; the
one-row group GEMV's fp16 partial sums (G a multiple of 64) within gemv_partial_bound instead
(tests/kernels/test_kern_gemv_partial.py), and the one-row any-precision GEMV's at <= 3 bits within
gemv_pair_partial_bound (tests/kernels/test_kern_anyprec_partial.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
import torch

from mpsim.engine.kernel_weights import anyprec_weight, group_weight
from mpsim.kernels.gemm import AnyPrecWeight, Fp16Weight, GroupWeight, Weight, linear
from mpsim.kernels.gemm_fp16 import gemm_fp16
from mpsim.kernels.gemm_group import gemm_group
from mpsim.kernels.launch_config import LaunchConfig, cdiv, gemm_config, gemv_partial_trips, gemv_trips
from mpsim.reference.anyprec import dequantize_anyprec, quantize_anyprec
from mpsim.reference.exact import gemm_float64
from mpsim.reference.gemm_anyprec import gemm_anyprec_weight_ref
from mpsim.reference.gemm_fp16 import gemm_fp16_ref
from mpsim.reference.gemm_group import gemm_group_weight_ref
from mpsim.reference.group_quant import dequantize_group, quantize_group
from mpsim.reference.tolerance import (
    assert_close_bound,
    gemm_bound,
    gemv_pair_partial_bound,
    gemv_partial_bound,
)
from mpsim.traces.recorder import Recorder

CPU = torch.device("cpu")
Twin = Callable[[np.ndarray, np.ndarray | None], np.ndarray]
FORMATS = ("fp16", "int8", "int4", "int3", "int2", "ap4", "ap3", "ap2")
ROWS = (1, 7, 16, 33)  # GEMV with one row, GEMV via tl.dot, the GEMV limit, the tiled GEMM
N, K, GROUP = 129, 160, 32  # N past a block of 32, K = 5 tiles of 32 (the split-K path at K >= 128)
ANYPREC_PARENT = 4


def make_weight(fmt: str, n: int, k: int, group: int, seed: int) -> tuple[Weight, np.ndarray]:
    """A weight container of format `fmt` and the fp16 W_hat (N, K) the reference says it holds."""
    weight, w_hat, _ = make_weight_and_twin(fmt, n, k, group, seed)
    return weight, w_hat


def make_weight_and_twin(fmt: str, n: int, k: int, group: int,
                         seed: int) -> tuple[Weight, np.ndarray, Twin]:
    """... plus the numba reference twin of the kernel, y = twin(x, bias)."""
    w = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float16)
    if fmt == "fp16":
        return Fp16Weight(torch.from_numpy(w)), w, lambda x, b: gemm_fp16_ref(x, w, b)
    if fmt.startswith("int"):
        gw = quantize_group(w, int(fmt[3:]), group)
        return (group_weight(gw, CPU), dequantize_group(gw),
                lambda x, b: gemm_group_weight_ref(x, gw, b))
    bits = int(fmt[2:])
    apw = quantize_anyprec(w, ANYPREC_PARENT, 2)
    return (anyprec_weight(apw, bits, CPU), dequantize_anyprec(apw, bits),
            lambda x, b: gemm_anyprec_weight_ref(x, apw, bits, b))


def activations(m: int, k: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 1000).standard_normal((m, k)).astype(np.float16)


def linear_bound(weight: Weight, w_hat: np.ndarray, x: np.ndarray,
                 bias: np.ndarray | None) -> np.ndarray:
    """gemm_bound, or gemv_partial_bound / gemv_pair_partial_bound where the launcher's config takes
    the one-row group / any-precision GEMV's fp16 partial sums (kernels/gemv_group.py, gemv_anyprec.py)."""
    m, k = x.shape
    if isinstance(weight, AnyPrecWeight) and gemv_trips("anyprec", weight.bits, None, m, 32) > 1:
        assert weight.pair_exps is not None
        trips = gemv_trips("anyprec", weight.bits, None, m, 32)
        return gemv_pair_partial_bound(x, w_hat, weight.pair_exps[weight.bits], trips, bias)
    if isinstance(weight, GroupWeight):
        g = weight.group_size
        cfg = gemm_config(m, w_hat.shape[0], k, weight.w_format, weight.bits, g, on_gpu=False)
        trips = gemv_partial_trips(weight.bits, g, cfg.block_m, cfg.block_k or 1)
        if trips > 1:
            s_k = np.repeat(weight.scales.numpy().astype(np.float64), g, axis=1)[:, :k]
            return gemv_partial_bound(x, w_hat, s_k, weight.bits, trips, bias)
    return gemm_bound(x, w_hat, bias)


def check_linear(weight: Weight, w_hat: np.ndarray, x: np.ndarray, bias: np.ndarray | None,
                 what: str) -> None:
    tb = None if bias is None else torch.from_numpy(bias)
    y = linear(torch.from_numpy(x), weight, tb)
    assert y.dtype == torch.float16 and tuple(y.shape) == (x.shape[0], w_hat.shape[0])
    assert_close_bound(y.numpy(), gemm_float64(x, w_hat, bias), linear_bound(weight, w_hat, x, bias),
                       what)


@pytest.fixture(scope="module")
def twins() -> dict[str, tuple[Weight, np.ndarray, Twin]]:
    return {fmt: make_weight_and_twin(fmt, N, K, GROUP, seed=i) for i, fmt in enumerate(FORMATS)}


@pytest.fixture(scope="module")
def weights(twins: dict) -> dict[str, tuple[Weight, np.ndarray]]:
    return {fmt: (weight, w_hat) for fmt, (weight, w_hat, _) in twins.items()}


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_every_format_within_bound(weights: dict, fmt: str, m: int) -> None:
    weight, w_hat = weights[fmt]
    x = activations(m, K, seed=m)
    bias = activations(1, N, seed=7 * m)[0] if m % 2 else None  # odd M with a bias
    check_linear(weight, w_hat, x, bias, f"{fmt} M={m}")


@pytest.mark.parametrize("m", (1, 16, 33))
@pytest.mark.parametrize("fmt", FORMATS)
def test_kernel_matches_its_numba_twin(twins: dict, fmt: str, m: int) -> None:
    """kernels/gemm_X.py::gemm_X vs reference/gemm_X.py::gemm_X_ref: each within its own bound of
    the float64 product, so within the sum of both of each other."""
    weight, w_hat, twin = twins[fmt]
    x = activations(m, K, seed=100 + m)
    bias = activations(1, N, seed=200 + m)[0]
    y = linear(torch.from_numpy(x), weight, torch.from_numpy(bias)).numpy()
    y_ref = twin(x, bias)
    both = linear_bound(weight, w_hat, x, bias) + gemm_bound(x, w_hat, bias)
    assert_close_bound(y, y_ref.astype(np.float64), both, f"{fmt} twin")


@pytest.mark.parametrize(("fmt", "n", "k", "group"), [
    ("int4", 33, 96, 32),    # K = 3 tiles, no split
    ("int3", 33, 96, 64),    # K padded to 128 (two 64-groups), the tile inside a group
    ("int2", 20, 70, -1),    # whole-row group, K padded to 96
    ("int8", 40, 250, 128),  # K padded to 256, BLOCK_K < G
    ("ap3", 33, 70, 0),      # K padded to 96 with code 0: x must be masked past K
    ("fp16", 5, 7, 0),       # K smaller than one tile
])
@pytest.mark.parametrize("m", (1, 16, 33))
def test_linear_padded_and_group_shapes(fmt: str, n: int, k: int, group: int, m: int) -> None:
    weight, w_hat = make_weight(fmt, n, k, group, seed=n + k)
    check_linear(weight, w_hat, activations(m, k, seed=k), None, f"{fmt} {m}x{n}x{k} G={group}")


def gemv_config(n: int, split_k: int, block_m: int) -> LaunchConfig:
    kernel = "gemv_group_kernel"
    return LaunchConfig(kernel, (cdiv(n, 32), split_k), block_m, 32, 32, 4, 1, split_k)


@pytest.mark.parametrize("split_k", (1, 2, 3, 5))
def test_split_k_widths_agree_with_bound_and_are_deterministic(weights: dict,
                                                                split_k: int) -> None:
    """Any split (5 = one 32-column tile each) reduces to the same bound; reruns give equal bits."""
    gw, w_hat = weights["int4"]
    x = activations(7, K, seed=3)
    cfg = gemv_config(N, split_k, 8)
    args = (torch.from_numpy(x), gw.qweight, gw.scales, gw.zeros)
    first = gemm_group(*args, bits=4, group_size=GROUP, config=cfg)
    again = gemm_group(*args, bits=4, group_size=GROUP, config=cfg)  # counters were reset to 0
    assert torch.equal(first, again)
    assert_close_bound(first.numpy(), gemm_float64(x, w_hat), gemm_bound(x, w_hat), "split")


def test_a_config_with_an_empty_split_is_refused(weights: dict) -> None:
    """Six splits of K = 5 tiles leave one without a tile: the kernels tell the compiler every split
    has one (gemm_common.gemv_program's tl.assume), so the launcher refuses it before launching."""
    gw, _ = weights["int4"]
    args = (torch.from_numpy(activations(7, K, seed=3)), gw.qweight, gw.scales, gw.zeros)
    with pytest.raises(ValueError, match=r"6 K splits of 32 columns leave .* expected at most 5"):
        gemm_group(*args, bits=4, group_size=GROUP, config=gemv_config(N, 6, 8))


def test_gemv_and_gemm_paths_agree_within_bounds() -> None:
    """The 16-row GEMV (split-K) and a forced tiled GEMM config compute the same product."""
    w = np.random.default_rng(5).standard_normal((N, K)).astype(np.float16)
    x = activations(16, K, seed=5)
    tiled = LaunchConfig("gemm_fp16_kernel", (cdiv(N, 32),), 16, 32, 32, 4, 1, group_m=8)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    y_gemv, y_gemm = gemm_fp16(xt, wt), gemm_fp16(xt, wt, config=tiled)
    bound = 2 * gemm_bound(x, w)  # each within its bound of the same float64 product
    assert_close_bound(y_gemv.numpy(), y_gemm.numpy().astype(np.float64), bound, "paths")


def test_linear_keeps_leading_dims_and_reads_fewer_planes(weights: dict) -> None:
    apw, _ = weights["ap4"]
    x = activations(6, K, seed=11).reshape(2, 3, K)
    y4 = linear(torch.from_numpy(x), apw)
    y2 = linear(torch.from_numpy(x), apw.at_bits(2))
    assert tuple(y4.shape) == (2, 3, N)
    assert apw.at_bits(2).bits == 2 and not torch.equal(y4, y2)


def test_linear_records_one_trace_row_with_the_config_it_ran() -> None:
    weight, _ = make_weight("int3", 40, 96, 32, seed=1)
    x = torch.from_numpy(activations(3, 96, seed=1))
    with Recorder() as rec:
        linear(x, weight, torch.zeros(40, dtype=torch.float16))
    rows = rec.finish()
    cfg = gemm_config(3, 40, 96, "int3-group", 3, 32, on_gpu=False)
    assert len(rows) == 1
    row = rows[0]
    assert (row["kernel"], row["op"], row["m"], row["n"], row["k"]) == (cfg.kernel, "gemm", 3, 40, 96)
    assert (row["w_format"], row["w_bits"], row["group_size"], row["bias"]) == ("int3-group", 3, 32, True)
    assert json.loads(row["grid"]) == list(cfg.grid)
    assert json.loads(row["config"]) == cfg.config_dict()
