"""The folded decode's code extraction (kernels/kv_fold.py, interpreter on CPU): the fp16 codes it reads
from whole 32-bit words equal reference/kv_quant.py's codes bit for bit, in both forms (the integers, and
the subnormals code * 2^(k-24) that kv_code_scale turns back into them), 0 in masked rows and past D."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from mpsim.kernels.kv_fold import kv_code_scale, kv_codes
from mpsim.reference.kv_quant import kv_quant_ref, unpack_int4


@triton.jit
def _codes_kernel(data_ptr, out_ptr, scale_ptr, n_rows, stride_row, D, BITS: tl.constexpr,
                  SUB: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.arange(0, BLOCK_N)
    c = kv_codes(data_ptr, rows * stride_row, rows < n_rows, D, BITS, BLOCK_N, BLOCK_D, SUB)
    d = tl.arange(0, BLOCK_D)
    tl.store(out_ptr + rows[:, None] * BLOCK_D + d[None, :], c)
    tl.store(scale_ptr + d, kv_code_scale(BITS, BLOCK_D))


def _extract(codes_packed: np.ndarray, bits: int, d: int, sub: bool, n_rows: int,
             block_n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    block_d = triton.next_power_of_2(d)
    data = torch.from_numpy(np.ascontiguousarray(codes_packed)).view(torch.int32)
    out = torch.full((block_n, block_d), 7.0, dtype=torch.float16)
    scale = torch.zeros(block_d, dtype=torch.float32)
    _codes_kernel[(1,)](data, out, scale, n_rows, data.stride(0), d, BITS=bits, SUB=sub,
                        BLOCK_N=block_n, BLOCK_D=block_d)
    return out.numpy(), scale.numpy()


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("d", [64, 80])
@pytest.mark.parametrize("sub", [False, True])
def test_codes_equal_the_reference_bit_for_bit(bits: int, d: int, sub: bool) -> None:
    rng = np.random.default_rng(bits * 1000 + d)
    x = (rng.standard_normal((16, d)) * 2).astype(np.float16)
    x[3] = 1.0  # a constant row: every code 0
    packed, _, _ = kv_quant_ref(x, bits)
    want = (unpack_int4(packed) if bits == 4 else packed).astype(np.float32)
    assert want.max() == (1 << bits) - 1 and want.min() == 0
    n_rows = 13  # rows 13..15 masked
    got, scale = _extract(packed, bits, d, sub, n_rows)
    k = np.where(np.arange(got.shape[1]) % 2 == 1, 4, 0) if bits == 4 else np.zeros(got.shape[1])
    assert np.array_equal(scale, (2.0 ** (24 - k)).astype(np.float32))
    expect = np.zeros(got.shape, np.float32)
    expect[:n_rows, :d] = want[:n_rows]
    if sub:  # exact subnormals code * 2^(k - 24); times the scale, the code
        expect = expect * (2.0 ** (k - 24)).astype(np.float32)
        back = got.astype(np.float32) * scale
        assert np.array_equal(back[:n_rows, :d], want[:n_rows])
    assert np.array_equal(got.view(np.uint16), expect.astype(np.float16).view(np.uint16))
