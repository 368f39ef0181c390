"""The exact parts of the GEMM kernels: dequantized weight tiles equal the reference's, bit for bit.

`dequant_group` / `dequant_anyprec` run the very @triton.jit tile helper the GEMV and GEMM use, so
equality here (compared as uint16 bit patterns, so -0.0 != 0.0 and NaNs would show) pins the unpacking,
the pair extraction (incl. the 3-bit unit gathered from the top nibbles), the scale/zero arithmetic
and the bit-plane LUT lookup.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.kernels.gemm_anyprec import dequant_anyprec
from mpsim.kernels.gemm_group import dequant_group
from mpsim.kernels.table_rows import rows_aligned
from mpsim.reference.anyprec import codes_to_planes, dequantize_anyprec, quantize_anyprec
from mpsim.reference.group_quant import GroupQuantWeight, dequantize_group, quantize_group
from mpsim.reference.packing import pack_codes


def bits_of(a: np.ndarray | torch.Tensor) -> np.ndarray:
    arr = a.numpy() if isinstance(a, torch.Tensor) else a
    return np.ascontiguousarray(arr, dtype=np.float16).view(np.uint16)


def kernel_dequant_group(gw: GroupQuantWeight, tile: str = "gemv") -> torch.Tensor:
    t = [torch.from_numpy(a) for a in (gw.qweight, gw.scales, gw.zeros)]
    return dequant_group(*t, k=gw.k, bits=gw.bits, group_size=gw.group_size, **TILE_ARGS[tile])


# the tile the tl.dot loops build (dot_tile._dot_w: pairs by a broadcast shift vector, each taken at
# its own bits of unit >> 8 j // ..., the subtract and multiply written on (high, low)), with 3-bit
# unit 3 gathered high (dot_tile.unit3_high: the 2..16-row GEMVs on Hopper) or low (the tiled GEMM,
# Ampere), or the one-row GEMV's tile
TILE_ARGS = {"gemv": dict(dot=False), "dot": dict(dot=True, unit3_high=True),
             "dot-unit3-low": dict(dot=True, unit3_high=False)}


def tiles(*widths: int) -> pytest.MarkDecorator:
    """(bits, tile) of every width and tile; the low unit-3 gather only at 3 bits (elsewhere the two
    dot tiles are the same code)."""
    return pytest.mark.parametrize(("bits", "tile"), [(b, t) for b in widths for t in TILE_ARGS
                                                      if t != "dot-unit3-low" or b == 3])


@tiles(8, 4, 3, 2)
@pytest.mark.parametrize(("n", "k", "group"), [
    (129, 160, 32), (7, 96, 64), (33, 250, 128), (20, 70, -1), (1, 33, 32),
])
@pytest.mark.parametrize("symmetric", (False, True))
def test_dequant_group_equals_reference(bits: int, n: int, k: int, group: int,
                                        symmetric: bool, tile: str) -> None:
    w = np.random.default_rng(n * k + bits).standard_normal((n, k)).astype(np.float16)
    gw = quantize_group(w, bits, group, symmetric=symmetric)
    np.testing.assert_array_equal(bits_of(kernel_dequant_group(gw, tile)),
                                  bits_of(dequantize_group(gw)))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 200), bits=st.sampled_from((2, 3, 4, 8)),
       group=st.sampled_from((32, 64, 128, -1)), scale=st.floats(1e-3, 1e3),
       seed=st.integers(0, 2**31), tile=st.sampled_from(tuple(TILE_ARGS)))
def test_dequant_group_equals_reference_property(n: int, k: int, bits: int, group: int,
                                                 scale: float, seed: int, tile: str) -> None:
    w = (np.random.default_rng(seed).standard_normal((n, k)) * scale).astype(np.float16)
    gw = quantize_group(w, bits, group)
    np.testing.assert_array_equal(bits_of(kernel_dequant_group(gw, tile)),
                                  bits_of(dequantize_group(gw)))


@tiles(8, 4, 3, 2)
def test_group_unpacking_recovers_every_code_position(bits: int, tile: str) -> None:
    """Scale 1 and zero 0 make W_hat the codes themselves: every slot of every word and 3-bit unit."""
    n, kp = 9, 96
    codes = np.random.default_rng(bits).integers(0, 1 << bits, (n, kp), dtype=np.uint8)
    codes[0] = (1 << bits) - 1  # all ones: a wrong mask or shift shows in every slot
    ones = torch.ones((n, 3), dtype=torch.float16)
    got = dequant_group(torch.from_numpy(pack_codes(codes, bits)), ones, torch.zeros_like(ones),
                        k=kp, bits=bits, group_size=32, **TILE_ARGS[tile])
    np.testing.assert_array_equal(got.numpy(), codes.astype(np.float16))


@pytest.mark.parametrize(("parent", "n", "k"), [(4, 129, 160), (4, 7, 70), (8, 33, 96)])
def test_dequant_anyprec_equals_reference_at_every_width(parent: int, n: int, k: int) -> None:
    w = np.random.default_rng(parent * n + k).standard_normal((n, k)).astype(np.float16)
    apw = quantize_anyprec(w, parent, 2)
    qweight = torch.from_numpy(apw.qweight)
    for bits in range(apw.seed_bits, parent + 1):
        got = dequant_anyprec(qweight, rows_aligned(torch.from_numpy(apw.luts[bits])), k=k,
                                  bits=bits)
        np.testing.assert_array_equal(bits_of(got), bits_of(dequantize_anyprec(apw, bits)),
                                      err_msg=f"parent {parent} read at {bits} bits")


@pytest.mark.parametrize("bits", (1, 2, 3, 4, 5, 6))
def test_anyprec_reads_the_top_planes_only(bits: int) -> None:
    """code_b = parent code >> (P - b) looked up per row; planes b..P-1 may hold anything."""
    parent, n, k = 6, 10, 64
    rng = np.random.default_rng(bits)
    codes = rng.integers(0, 1 << parent, (n, k), dtype=np.uint8)
    planes = codes_to_planes(codes, parent)
    lut = (np.arange(n)[:, None] * 100 + np.arange(1 << bits)[None, :]).astype(np.float16)
    expected = np.take_along_axis(lut, (codes >> (parent - bits)).astype(np.intp), axis=1)
    planes[bits:] = rng.integers(-(2**31), 2**31, planes[bits:].shape, dtype=np.int64)
    got = dequant_anyprec(torch.from_numpy(planes), rows_aligned(torch.from_numpy(lut)), k=k,
                          bits=bits)
    np.testing.assert_array_equal(got.numpy(), expected)


@tiles(4, 3, 2)
def test_every_code_at_every_position_against_every_zero(bits: int, tile: str) -> None:
    """At 3 and 2 bits (and at 4 in the dot tile) most pairs are taken at their own bits with a
    per-bit magic constant and offset (group_dequant._at, _dot_w): every code value at every slot
    of a chunk, against every zero value and scales down to the subnormal outputs, equals
    fp16(float32(q - z) * float32(s))."""
    levels = 1 << bits
    n, kp = levels * levels, 64
    rows = np.arange(n)
    codes = ((rows[:, None] + np.arange(kp)[None, :] * 7) % levels).astype(np.uint8)
    zeros = np.repeat((rows // levels % levels).astype(np.float16)[:, None], 2, axis=1)
    rng = np.random.default_rng(bits)
    scales = rng.choice(np.array([2.0**-24, 3.0 * 2**-20, 1e-3, 0.37, 5.5], np.float16), (n, 2))
    got = dequant_group(torch.from_numpy(pack_codes(codes, bits)), torch.from_numpy(scales),
                        torch.from_numpy(zeros), k=kp, bits=bits, group_size=32, **TILE_ARGS[tile])
    q_minus_z = codes.astype(np.float32) - np.repeat(zeros, 32, axis=1).astype(np.float32)
    want = (q_minus_z * np.repeat(scales, 32, axis=1).astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(bits_of(got), bits_of(want))
