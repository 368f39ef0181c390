"""Uniform group format: packing layout, exact round trips, the half-step error, padding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.reference.group_quant import (
    dequantize_group,
    pack_codes,
    quantize_group,
    unpack_codes,
)
from mpsim.reference.tolerance import FP16_HALF_SUBNORMAL, U16, U32
from mpsim.traces.accounting import padded_k

BITS = (2, 3, 4, 8)
GROUPS = (32, 64, 128, -1)
SETTINGS = settings(max_examples=25, deadline=None)


def _pack_by_integers(codes: np.ndarray, bits: int) -> np.ndarray:
    """Independent packing: each 32-code chunk as Python-integer units of P codes (even codes in the
    low 16-bit half, odd in the high one), the fourth 3-bit unit spread over the top nibbles."""
    n, kp = codes.shape
    per = 8 if bits == 3 else 32 // bits
    out = np.zeros((n, kp // 32 * bits), dtype=np.uint32)
    for r in range(n):
        for c in range(kp // 32):
            chunk = [int(v) for v in codes[r, c * 32:(c + 1) * 32]]
            units = [sum(chunk[u * per + p] << (16 * (p % 2) + bits * (p // 2)) for p in range(per))
                     for u in range(32 // per)]
            for j in range(bits):
                word = units[j]
                if bits == 3:
                    word |= ((units[3] >> 4 * j) & 0xF) << 12 | ((units[3] >> (16 + 4 * j)) & 0xF) << 28
                out[r, c * bits + j] = word
    return out.view(np.int32)


@SETTINGS
@given(bits=st.sampled_from(BITS), n=st.integers(1, 3), chunks=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_pack_unpack_identity_and_layout(bits: int, n: int, chunks: int, seed: int) -> None:
    codes = np.random.default_rng(seed).integers(0, 1 << bits, (n, 32 * chunks), dtype=np.uint8)
    packed = pack_codes(codes, bits)
    assert packed.dtype == np.int32 and packed.shape == (n, chunks * bits)
    np.testing.assert_array_equal(packed, _pack_by_integers(codes, bits))
    np.testing.assert_array_equal(unpack_codes(packed, bits, 32 * chunks), codes)


@pytest.mark.parametrize("bits", BITS)
def test_every_code_value_at_every_position_round_trips(bits: int) -> None:
    qmax = (1 << bits) - 1
    # row r holds code (r + i) % 2^b at position i: every value visits every bit offset
    codes = ((np.arange(1 << bits)[:, None] + np.arange(64)[None, :]) % (qmax + 1)).astype(np.uint8)
    np.testing.assert_array_equal(unpack_codes(pack_codes(codes, bits), bits, 64), codes)


@pytest.mark.parametrize("bits", BITS)
def test_one_shift_and_mask_extracts_neighbouring_codes(bits: int) -> None:
    """The GEMV's pair extraction, (unit >> b*j) & mask16x2, gives codes 2j and 2j+1 of the unit."""
    codes = np.random.default_rng(bits).integers(0, 1 << bits, (1, 32), dtype=np.uint8)
    w = [int(v) for v in pack_codes(codes, bits).view(np.uint32)[0]]
    per = 8 if bits == 3 else 32 // bits
    units = w[:bits] if bits != 3 else [*w, sum(((w[r] >> (12 + 16 * h)) & 0xF) << (16 * h + 4 * r)
                                                for r in range(3) for h in range(2))]
    mask = ((1 << bits) - 1) * 0x00010001
    for i in range(0, 32, 2):
        pair = (units[i // per] >> bits * ((i % per) // 2)) & mask
        assert (pair & 0xFFFF, pair >> 16) == (codes[0, i], codes[0, i + 1])


def test_four_bit_layout_is_the_awq_interleave() -> None:
    """Word nibbles 0..7 hold codes 0, 2, 4, 6, 1, 3, 5, 7 (AWQ's order map)."""
    codes = np.tile(np.arange(8, dtype=np.uint8), 4)[None, :]
    word = int(pack_codes(codes, 4).view(np.uint32)[0, 0])
    assert [(word >> 4 * i) & 0xF for i in range(8)] == [0, 2, 4, 6, 1, 3, 5, 7]


def _representable(rng: np.random.Generator, n: int, k: int, bits: int, g: int, sym: bool) -> tuple:
    """Weights (q - z) * 2^e built from codes that pin min and max, so quantization recovers them."""
    qmax = (1 << bits) - 1
    kp = -(-k // 32) * 32
    g = kp if g == -1 else g
    kp = -(-kp // g) * g
    ng = kp // g
    e = rng.integers(-14, 3, (n, ng))
    if sym:
        z = np.full((n, ng), 1 << (bits - 1))
        q = rng.integers(1, qmax + 1, (n, kp))
    else:
        z = rng.integers(0, qmax + 1, (n, ng))
        q = rng.integers(0, qmax + 1, (n, kp))
    for gi in range(ng):
        real = min(g, k - gi * g)
        lo = gi * g
        if sym:
            q[:, lo] = qmax
        elif real >= 2:
            q[:, lo], q[:, lo + 1] = 0, qmax
        else:
            z[:, gi], q[:, lo] = 0, qmax
        q[:, lo + real : lo + g] = z[:, gi : gi + 1]  # padding: value 0
    zz = np.repeat(z, g, axis=1)
    w = ((q - zz) * np.ldexp(1.0, np.repeat(e, g, axis=1))).astype(np.float16)
    return w[:, :k], q.astype(np.uint8), np.ldexp(1.0, e).astype(np.float16), z.astype(np.float16)


@SETTINGS
@given(
    bits=st.sampled_from(BITS),
    group=st.sampled_from(GROUPS),
    sym=st.booleans(),
    n=st.sampled_from((1, 7)),
    k=st.sampled_from((1, 7, 33, 129, 256)),
    seed=st.integers(0, 2**31),
)
def test_representable_values_round_trip_exactly(
    bits: int, group: int, sym: bool, n: int, k: int, seed: int
) -> None:
    w, q, s, z = _representable(np.random.default_rng(seed), n, k, bits, group, sym)
    gw = quantize_group(w, bits, group, symmetric=sym)
    np.testing.assert_array_equal(gw.scales, s)
    np.testing.assert_array_equal(gw.zeros, z)
    np.testing.assert_array_equal(unpack_codes(gw.qweight, bits, q.shape[1]), q)
    np.testing.assert_array_equal(dequantize_group(gw), w)


def _half_step_bound(w: np.ndarray, gw, clamped_slack: bool) -> np.ndarray:
    """s/2 + u|w| (the fp32 division) + fp16 rounding of w_hat; plus the top-code clamp slack."""
    s = np.repeat(gw.scales.astype(np.float64), gw.group_size, axis=1)[:, : gw.k]
    w64 = np.abs(w.astype(np.float64))
    step = 0.5 * s
    if clamped_slack:  # fp16(s) may be below (max - min)/qmax by u16 (+2 fp32 roundings)
        qmax = (1 << gw.bits) - 1
        shrink = (1 - U16) * (1 - U32) ** 2
        step = step + s * qmax * (1 - shrink) / shrink
    return step + U32 * w64 + U16 * (w64 + step) + FP16_HALF_SUBNORMAL


@SETTINGS
@given(
    bits=st.sampled_from(BITS),
    group=st.sampled_from(GROUPS),
    sym=st.booleans(),
    k=st.sampled_from((7, 33, 129, 200)),
    dist=st.sampled_from(("normal", "t3", "uniform")),
    seed=st.integers(0, 2**31),
)
def test_dequantize_within_half_a_step(
    bits: int, group: int, sym: bool, k: int, dist: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    raw = {
        "normal": rng.standard_normal((5, k)),
        "t3": rng.standard_t(3, (5, k)),
        "uniform": rng.uniform(-1, 1, (5, k)),
    }[dist]
    w = (raw * 0.02).astype(np.float16)
    # every 32 columns (so every group) span 0: groups of one sign saturate by contract, see
    # docs/numerics.md ("Limits of the pinned formats")
    w[:, ::32], w[:, 1::32] = -0.01, 0.01
    gw = quantize_group(w, bits, group, symmetric=sym)
    err = np.abs(dequantize_group(gw).astype(np.float64) - w.astype(np.float64))
    codes = unpack_codes(gw.qweight, bits, k)
    top = codes == (1 << bits) - 1
    assert (err[~top] <= _half_step_bound(w, gw, False)[~top]).all()
    assert (err <= _half_step_bound(w, gw, not sym)).all()


@pytest.mark.parametrize("bits", BITS)
def test_padding_codes_are_the_zero_code(bits: int) -> None:
    w = (np.random.default_rng(1).standard_normal((3, 40)) * 0.1).astype(np.float16)
    gw = quantize_group(w, bits, 32)
    codes = unpack_codes(gw.qweight, bits, 64)
    np.testing.assert_array_equal(codes[:, 40:], np.repeat(gw.zeros[:, 1:2], 24, 1).astype(np.uint8))
    assert dequantize_group(gw).shape == (3, 40)


def test_symmetric_zero_is_midpoint_and_asymmetric_scale_formula() -> None:
    w = np.array([[-0.5, 0.25, 1.0, 0.0] * 8], dtype=np.float16)
    sym = quantize_group(w, 4, 32, symmetric=True)
    assert sym.zeros[0, 0] == 8 and sym.scales[0, 0] == np.float16(1.0 / 7)
    asym = quantize_group(w, 4, 32)
    assert asym.scales[0, 0] == np.float16(np.float32(1.5) / np.float32(15))
    assert asym.zeros[0, 0] == np.rint(np.float32(0.5) / np.float32(asym.scales[0, 0]))


def test_whole_row_group_resolves_to_padded_k() -> None:
    gw = quantize_group(np.ones((2, 70), np.float16), 4, -1)
    assert gw.group_size == 96 and gw.scales.shape == (2, 1) and gw.k_padded == 96


@pytest.mark.parametrize(("k", "group"), [(70, -1), (70, 70), (70, 32), (70, 64), (100, 128), (256, 256)])
def test_packed_width_is_the_accounting_padded_k(k: int, group: int) -> None:
    gw = quantize_group(np.ones((2, k), np.float16), 4, group)
    assert gw.k_padded == padded_k(k, group) and gw.qweight.shape[1] == padded_k(k, group) * 4 // 32


@pytest.mark.parametrize(
    ("bits", "group", "match"), [(5, 32, "bits=5"), (4, 48, "group_size=48"), (4, 0, "group_size=0")]
)
def test_bad_arguments_name_the_value(bits: int, group: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        quantize_group(np.zeros((2, 64), np.float16), bits, group)


def test_codes_that_do_not_fit_are_rejected() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        pack_codes(np.full((1, 32), 4, np.uint8), 2)
