"""FP4: nibble packing, e8m0 scales, MXFP4 and NVFP4 block quantization (docs/formats.md#fp4): hand-
computed blocks, the contract recomputed block by block with the table oracle, exact dequantization."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minifloat_oracle import E2M1_SPEC, E4M3_SPEC, oracle_encode

from mpsim.reference.fp4 import decode_e2m1, decode_e8m0, mx_scale_code, pack_fp4, unpack_fp4
from mpsim.reference.fp4_quant import FP4_KINDS, block_scale_values, dequantize_fp4, quantize_fp4
from mpsim.reference.fp8 import decode_e4m3

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def _weights(seed: int, n: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)) * np.ldexp(1.0, rng.integers(-10, 10, (n, 1)))
    w[:, rng.random(k) < 0.05] *= 2.0**-14  # blocks far below the tensor's amax
    w[rng.random(n) < 0.1] = 0.0
    return w.astype(np.float16)


def test_nibble_order_and_round_trip() -> None:
    codes = np.array([[1, 2, 3, 4, 15, 0]], np.uint8)
    packed = pack_fp4(codes)
    assert packed.tolist() == [[0x21, 0x43, 0x0F]]  # element 2i low nibble, 2i+1 high nibble
    np.testing.assert_array_equal(unpack_fp4(packed), codes)
    every = np.arange(256, dtype=np.uint8)[None, :]
    np.testing.assert_array_equal(pack_fp4(unpack_fp4(every)), every)
    with pytest.raises(ValueError, match="K even"):
        pack_fp4(np.zeros((1, 3), np.uint8))
    with pytest.raises(ValueError, match="4 bits"):
        pack_fp4(np.array([[16, 0]], np.uint8))


def test_e8m0_values_and_mx_scale_choice() -> None:
    v = decode_e8m0(np.array([0, 1, 127, 130, 254, 255], np.uint8))
    assert v[:5].tolist() == [2.0**-127, 2.0**-126, 1.0, 8.0, 2.0**127] and np.isnan(v[5])
    # X = 2^(floor(log2 amax) - 2): amax 6 -> 1, 7.9 -> 1, 8 -> 2, 0.3 -> 2^-4, 0 -> 2^-127 (code 0)
    amax = np.array([6.0, 7.9, 8.0, 0.3, 0.0, 2.0**-140, 3e38], np.float32)
    assert mx_scale_code(amax).tolist() == [127, 127, 128, 123, 0, 0, 252]  # 2^-142 clamps to 2^-127
    with pytest.raises(ValueError, match="finite values >= 0"):
        mx_scale_code(np.array([-1.0], np.float32))


def test_mxfp4_hand_computed_block() -> None:
    w = np.zeros((1, 32), np.float16)
    w[0, :6] = [12.0, 11.0, 10.0, -3.0, 0.4, 15.0]  # amax 15: X = 2^(3 - 2) = 2
    f = quantize_fp4(w, "mxfp4")
    assert f.scales.tolist() == [[128]] and f.global_scale == 1.0
    codes = unpack_fp4(f.packed)[0, :6].tolist()
    # 12/2 = 6 (7); 5.5 -> 6 (7); 5 ties to 4 (6, even); -1.5 (0xB); 0.2 -> 0 (0); 7.5 clamps to 6 (7)
    assert codes == [7, 7, 6, 0xB, 0, 7]
    assert dequantize_fp4(f)[0, :6].tolist() == [12.0, 12.0, 8.0, -3.0, 0.0, 12.0]


def test_nvfp4_hand_computed_blocks() -> None:
    w = np.zeros((1, 64), np.float16)
    w[0, 0:2] = [6.0, 3.0]  # block 0: amax 6 -> S = e4m3(6 / 6 / g) = 1
    w[0, 16] = 2688.0  # block 1: the tensor amax: g = 2688 / 2688 = 1, S = 448
    w[0, 32:34] = [7.0, -1.0]  # block 2: S = e4m3(7 / 6) = 1.125 (0x39); 7 / 1.125 = 6.2 -> 6
    f = quantize_fp4(w, "nvfp4")  # block 3 all zero: S = 1 (ModelOpt's rule), codes 0
    assert f.global_scale == 1.0
    assert f.scales.tolist() == [[0x38, 0x7E, 0x39, 0x38]]
    c = unpack_fp4(f.packed)[0]
    assert c[[0, 1, 16, 32, 33]].tolist() == [7, 5, 7, 7, 0xA]  # 6, 3, 6, 6, -1 (-1 / 1.125 = -0.89 -> -1)
    assert dequantize_fp4(f)[0, [0, 1, 16, 32, 33]].tolist() == [6.0, 3.0, 2688.0, 6.75, -1.125]


def _contract(w: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """Block by block with fp32 scalars and the oracle encoders (independent of the reference)."""
    n, k = w.shape
    b = 32 if kind == "mxfp4" else 16
    kp = -(-k // b) * b
    x = np.zeros((n, kp), np.float32)
    x[:, :k] = w
    amax = np.float32(np.abs(x).max())
    g = np.float32(1) if kind == "mxfp4" or amax == 0 else np.float32(amax / np.float32(2688))
    codes, scales = np.zeros((n, kp), np.uint8), np.zeros((n, kp // b), np.uint8)
    for r in range(n):
        for j in range(kp // b):
            blk = x[r, j * b : (j + 1) * b]
            am = np.float32(np.abs(blk).max())
            if kind == "mxfp4":
                e = int(np.floor(np.log2(np.float64(am)))) - 2 if am > 0 else -127
                scales[r, j] = min(max(e, -127), 127) + 127
                denom = np.float32(2.0 ** (int(scales[r, j]) - 127))
            else:
                s = np.float32(1) if am == 0 else max(np.float32(am / np.float32(6 * g)), np.float32(2.0**-9))
                scales[r, j] = oracle_encode(np.float32(s), E4M3_SPEC, True)
                denom = np.float32(decode_e4m3(scales[r, j : j + 1])[0] * g)
            codes[r, j * b : (j + 1) * b] = oracle_encode(blk / denom, E2M1_SPEC, True)
    return codes, scales, g


@SETTINGS
@given(seed=st.integers(0, 2**31), n=st.integers(1, 6), k=st.integers(1, 200),
       kind=st.sampled_from(FP4_KINDS))
def test_quantization_matches_the_contract(seed: int, n: int, k: int, kind: str) -> None:
    w = _weights(seed, n, k)
    f = quantize_fp4(w, kind)
    codes, scales, g = _contract(w, kind)
    assert f.global_scale.view(np.uint32) == g.view(np.uint32)
    np.testing.assert_array_equal(f.scales, scales)
    np.testing.assert_array_equal(unpack_fp4(f.packed), codes)
    assert f.k == k and f.packed.shape == (n, codes.shape[1] // 2)


@SETTINGS
@given(seed=st.integers(0, 2**31), kind=st.sampled_from(FP4_KINDS))
def test_dequantized_values_are_code_times_scales(seed: int, kind: str) -> None:
    w = _weights(seed, 4, 100)
    f = quantize_fp4(w, kind)
    q = decode_e2m1(unpack_fp4(f.packed)).astype(np.float64)
    s = np.repeat(block_scale_values(f), f.block, axis=1).astype(np.float64)
    want = (q * s * np.float64(f.global_scale)).astype(np.float32)  # q*s exact, one rounding by g
    np.testing.assert_array_equal(dequantize_fp4(f), want[:, :100])
    if kind == "mxfp4":  # a power-of-two scale: dequantization is exact
        np.testing.assert_array_equal(dequantize_fp4(f).astype(np.float64), (q * s)[:, :100])


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="kind='int4'"):
        quantize_fp4(np.zeros((2, 32), np.float16), "int4")
    with pytest.raises(ValueError, match="float16"):
        quantize_fp4(np.zeros((2, 32), np.float32), "nvfp4")
    with pytest.raises(ValueError, match="inf or nan"):
        quantize_fp4(np.full((1, 16), np.nan, np.float16), "mxfp4")


def test_nvfp4_block_scale_order_and_floor() -> None:
    w = np.zeros((1, 48), np.float16)
    w[0, 0], w[0, 16] = 652.0, 500736 * 2.0**-24  # g = fl(652 / 2688)
    w[0, 32] = 0.001  # amax_b / (6 g) = 0.00069 < 2^-10 would round to e4m3 0: floored at 2^-9 (code 1)
    f = quantize_fp4(w, "nvfp4")
    # ModelOpt's order fl(amax_b / fl(6 g)) gives e4m3 code 11; fl(fl(amax_b / 6) / g) would give 10
    assert f.scales.tolist() == [[0x7E, 11, 0x01]]
    assert unpack_fp4(f.packed)[0, 32] == 4  # 0.001 / (2^-9 g) = 2.11 -> 2
