"""The any-precision pair table (docs/formats.md): the kernels' builder equals the reference's bit for
bit, the kernels' pair-table tile equals the reference dequantization bit for bit, and at <= 3 bits
every path (one-row GEMV, few-row GEMV, tiled GEMM) reads it (not the LUT) and is charged its bytes
in the trace."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import AnyPrecWeight, linear
from mpsim.kernels.gemm_anyprec import dequant_anyprec, gemm_anyprec, pair_exp, pair_table
from mpsim.kernels.launch_config import GEMM_GROUP_M, LaunchConfig
from mpsim.kernels.table_rows import rows_aligned
from mpsim.reference.anyprec import codes_to_planes, dequantize_anyprec, pair_index, quantize_anyprec
from mpsim.reference.anyprec import pair_table as ref_pair_table
from mpsim.reference.gemm_anyprec import gemv_anyprec_partial_ref
from mpsim.reference.tolerance import assert_close_bound, gemm_bound, gemv_pair_partial_bound
from mpsim.traces.accounting import (
    PAIR_MAX_BITS,
    anyprec_pair_bytes,
    gemm_weight_bytes,
    weight_bytes,
)
from mpsim.traces.recorder import Recorder


def bits_of(a: np.ndarray | torch.Tensor) -> np.ndarray:
    arr = a.numpy() if isinstance(a, torch.Tensor) else a
    return np.ascontiguousarray(arr, dtype=np.float16).view(np.uint16)


@pytest.mark.parametrize("bits", (1, 2, 3))
def test_pair_table_builders_agree_and_hold_every_pair(bits: int) -> None:
    lut = np.random.default_rng(bits).standard_normal((5, 1 << bits)).astype(np.float16)
    ref = ref_pair_table(lut)
    np.testing.assert_array_equal(bits_of(pair_table(torch.from_numpy(lut))), bits_of(ref))
    assert ref.shape == (5, 4**bits, 2) and ref.nbytes == anyprec_pair_bytes(5, bits)
    for ce in range(1 << bits):
        for co in range(1 << bits):
            i = int(pair_index(np.array(ce), np.array(co), bits))
            np.testing.assert_array_equal(bits_of(ref[:, i]), bits_of(lut[:, [ce, co]]))


def test_pair_table_rejects_wide_luts() -> None:
    with pytest.raises(ValueError, match="lut"):
        pair_table(torch.zeros((3, 16), dtype=torch.float16))
    with pytest.raises(ValueError, match="lut"):
        ref_pair_table(np.zeros((3, 16), dtype=np.float16))


# dot: the tile the tl.dot loops build (anyprec_dequant._anyprec_pair_dot: the residue a broadcast
# vector, the lookups in the MMA fragment's order)
DOT = pytest.mark.parametrize("dot", (False, True), ids=("gemv-tile", "dot-tile"))


@DOT
@pytest.mark.parametrize(("parent", "n", "k"), [(4, 129, 160), (4, 7, 70), (8, 33, 96)])
def test_pair_tile_equals_reference_at_every_pair_width(parent: int, n: int, k: int,
                                                        dot: bool) -> None:
    w = np.random.default_rng(parent * n + k).standard_normal((n, k)).astype(np.float16)
    apw = quantize_anyprec(w, parent, 1)
    qweight = torch.from_numpy(apw.qweight)
    for bits in range(1, PAIR_MAX_BITS + 1):
        lut = rows_aligned(torch.from_numpy(apw.luts[bits]))
        got = dequant_anyprec(qweight, lut, k=k, bits=bits, pairs=pair_table(lut), dot=dot)
        np.testing.assert_array_equal(bits_of(got), bits_of(dequantize_anyprec(apw, bits)),
                                      err_msg=f"parent {parent} read at {bits} bits")


@DOT
@pytest.mark.parametrize("bits", (2, 3))
def test_every_pair_at_every_position(bits: int, dot: bool) -> None:
    """All (2^b)^2 code pairs at every even position of a word; planes past b hold garbage."""
    parent, k = 5, 64
    size = 1 << bits
    pairs = np.array([(a, b) for a in range(size) for b in range(size)], dtype=np.uint8)
    n = len(pairs)
    rng = np.random.default_rng(bits)
    codes = np.empty((n, k), dtype=np.uint8)
    for p in range(k // 2):  # row r holds pair r + p at position p (every pair at every position)
        codes[:, 2 * p:2 * p + 2] = pairs[(np.arange(n) + p) % n]
    top = rng.integers(0, 1 << (parent - bits), (n, k), dtype=np.uint8)
    planes = codes_to_planes((codes << (parent - bits)) | top, parent)
    lut = (np.arange(n)[:, None] * 10 + np.arange(size)[None, :]).astype(np.float16)
    expected = np.take_along_axis(lut, codes.astype(np.intp), axis=1)
    t = rows_aligned(torch.from_numpy(lut))
    got = dequant_anyprec(torch.from_numpy(planes), t, k=k, bits=bits, pairs=pair_table(t),
                          dot=dot)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_one_row_gemv_needs_the_pair_table_and_matches_its_twin() -> None:
    n, k, bits = 40, 200, 3
    w = np.random.default_rng(3).standard_normal((n, k)).astype(np.float16)
    apw = quantize_anyprec(w, 4, 2)
    qweight, lut = torch.from_numpy(apw.qweight), rows_aligned(torch.from_numpy(apw.luts[bits]))
    x = np.random.default_rng(4).standard_normal((1, k)).astype(np.float16)
    with pytest.raises(ValueError, match="pairs"):
        gemm_anyprec(torch.from_numpy(x), qweight, lut, bits=bits)
    with pytest.raises(ValueError, match="pairs"):
        gemm_anyprec(torch.from_numpy(x), qweight, lut, bits=bits, pairs=pair_table(lut)[:, :8])
    weight = AnyPrecWeight(qweight, {b: torch.from_numpy(t) for b, t in apw.luts.items()}, bits, k)
    assert weight.pairs is not None and sorted(weight.pairs) == [2, 3]
    assert weight.at_bits(2).pairs is weight.pairs  # built once, shared by the narrower reads
    assert weight.pair_exps is not None and weight.at_bits(2).pair_exps is weight.pair_exps
    assert weight.pair_exps == {b: pair_exp(t) for b, t in weight.pairs.items()}
    with Recorder() as rec:
        y = linear(torch.from_numpy(x), weight).numpy()
    rows = rec.finish()
    y_ref = gemv_anyprec_partial_ref(x, apw.qweight, apw.luts[bits], bits, k, 32, 4)
    bound = gemv_pair_partial_bound(x, dequantize_anyprec(apw, bits), weight.pair_exps[bits], 4)
    assert_close_bound(y, y_ref.astype(np.float64), 2 * bound, "pair twin")
    (row,) = rows
    assert row["bytes_read"] == k * 2 + gemm_weight_bytes(1, n, k, "anyprec", bits, None)
    for m in (1, 2, 16, 64):  # every row count reads the pair table instead of the LUT
        assert gemm_weight_bytes(m, n, k, "anyprec", bits, None) == (
            weight_bytes(n, k, "anyprec", bits, None) - n * 8 * 2 + n * 64 * 4)


@pytest.mark.parametrize(("m", "kernel", "block_m"), [(1, "gemv", 1), (5, "gemv", 8),
                                                      (20, "gemm", 32)])
def test_every_path_reads_the_pair_table_not_the_lut(m: int, kernel: str, block_m: int) -> None:
    """The one-row GEMV, the few-row GEMV (tl.dot) and the tiled GEMM at 3 bits look their weights
    up in the pair table: handed the pair table of the LUT doubled (exact in fp16), each returns
    the product with the doubled weights, which the LUT it is also handed cannot give."""
    n, k, bits = 24, 96, 3
    w = np.random.default_rng(m).standard_normal((n, k)).astype(np.float16)
    apw = quantize_anyprec(w, 4, 2)
    qweight, lut = torch.from_numpy(apw.qweight), rows_aligned(torch.from_numpy(apw.luts[bits]))
    x = np.random.default_rng(m + 1).standard_normal((m, k)).astype(np.float16)
    cfg = LaunchConfig("gemv_anyprec_kernel", (1, 1), block_m, 32, 32, 4, 1, 1) if kernel == "gemv" \
        else LaunchConfig("gemm_anyprec_kernel", (1,), block_m, 32, 32, 4, 1, group_m=GEMM_GROUP_M)
    pairs2 = pair_table(lut * 2)
    y = gemm_anyprec(torch.from_numpy(x), qweight, lut, bits=bits, pairs=pairs2,
                     pair_exp=pair_exp(pairs2), config=cfg).numpy()
    w_hat2 = dequantize_anyprec(apw, bits).astype(np.float64) * 2
    bound = gemv_pair_partial_bound(x, w_hat2, pair_exp(pairs2), 4) if m == 1 else gemm_bound(x, w_hat2)
    assert_close_bound(y, x.astype(np.float64) @ w_hat2.T, bound, "pair table x 2")
