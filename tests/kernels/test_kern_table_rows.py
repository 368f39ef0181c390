"""The any-precision kernels address LUT and pair-table rows by OR (kernels/table_rows.py): the rows
must start at multiples of their size, every table mpsim builds does, and a table that does not is
one clear error, never a wrong read."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mpsim.kernels.gemm import AnyPrecWeight
from mpsim.kernels.gemm_anyprec import dequant_anyprec, gemm_anyprec, pair_exp, pair_table
from mpsim.kernels.table_rows import aligned_empty, check_rows_aligned, row_bytes, rows_aligned
from mpsim.reference.anyprec import dequantize_anyprec, quantize_anyprec


def _off_by(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    """A contiguous copy of t that starts `nbytes` past a multiple of its row size."""
    size = row_bytes(t)
    buf = aligned_empty((t.numel() * t.element_size() + size + nbytes,), torch.uint8, t.device,
                        size)
    out = buf[nbytes:nbytes + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


@pytest.mark.parametrize("align", (2, 32, 256, 1024))
def test_aligned_empty_starts_at_a_multiple_of_align(align: int) -> None:
    for shape in ((3, 16), (5, 64, 2), (1,)):
        t = aligned_empty(shape, torch.float16, "cpu", align)
        assert t.data_ptr() % align == 0 and t.is_contiguous() and tuple(t.shape) == shape
    with pytest.raises(ValueError, match="power of two"):
        aligned_empty((4,), torch.float16, "cpu", 24)


def test_pair_tables_and_weights_are_built_aligned() -> None:
    rng = np.random.default_rng(3)
    for bits in (1, 2, 3):
        lut = torch.from_numpy(rng.standard_normal((7, 1 << bits)).astype(np.float16))
        pairs = pair_table(lut)
        assert pairs.data_ptr() % (4 ** bits * 4) == 0
        check_rows_aligned("pairs", pairs)
    apw = quantize_anyprec(rng.standard_normal((9, 64)).astype(np.float16), 4, 2)
    luts = {b: _off_by(torch.from_numpy(t), 16) for b, t in apw.luts.items()}
    weight = AnyPrecWeight(torch.from_numpy(apw.qweight), luts, 4, 64)
    assert weight.luts[4].data_ptr() % 32 == 0  # copied at load: 16 bytes off before
    assert torch.equal(weight.luts[4], luts[4])
    assert rows_aligned(weight.luts[4]) is weight.luts[4]  # aligned already: no copy


def test_a_misaligned_table_is_one_error_naming_it() -> None:
    rng = np.random.default_rng(4)
    n, k = 9, 64
    apw = quantize_anyprec(rng.standard_normal((n, k)).astype(np.float16), 4, 2)
    qweight = torch.from_numpy(apw.qweight)
    lut4 = _off_by(torch.from_numpy(apw.luts[4]), 16)
    with pytest.raises(ValueError, match=r"lut: its rows of 32 bytes must start at multiples of 32"):
        dequant_anyprec(qweight, lut4, k=k, bits=4)
    lut3 = torch.from_numpy(apw.luts[3])
    pairs = _off_by(pair_table(lut3), 64)
    x = torch.from_numpy(rng.standard_normal((1, k)).astype(np.float16))
    with pytest.raises(ValueError, match=r"pairs: its rows of 256 bytes"):
        gemm_anyprec(x, qweight, lut3, bits=3, pairs=pairs, pair_exp=pair_exp(pairs))


@pytest.mark.parametrize("bits", (2, 3, 4))
def test_the_or_addressed_gathers_read_the_exact_values(bits: int) -> None:
    """Rows at offsets that exercise every address bit the OR touches: 33 rows (a row index with
    bits set above and below the row size), the exact LUT values at every code. (The GEMV and GEMM
    paths gather through the same helper: their twin tests run on it, test_kern_anyprec_*.py.)"""
    rng = np.random.default_rng(bits)
    n, k = 33, 96
    apw = quantize_anyprec(rng.standard_normal((n, k)).astype(np.float16), 4, 2)
    weight = AnyPrecWeight(torch.from_numpy(apw.qweight),
                           {b: torch.from_numpy(t) for b, t in apw.luts.items()}, bits, k)
    want = dequantize_anyprec(apw, bits)
    lut = weight.luts[bits]
    pairs = weight.pairs[bits] if weight.pairs and bits in weight.pairs else None
    for table in (pairs, None):  # the pair-table tile (<= 3 bits) and the LUT tile (every width)
        got = dequant_anyprec(weight.qweight, lut, k=k, bits=bits, pairs=table)
        np.testing.assert_array_equal(got.numpy().view(np.uint16), want.view(np.uint16))
