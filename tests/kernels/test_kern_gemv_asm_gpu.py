"""The inline-asm one-row group GEMV (kernels/gemv_group_asm.py) against its pure-Triton twin, bit for
bit, on a GPU (skipped without CUDA: the interpreter cannot run inline PTX). The GPU kit
(scripts/gpu-check.sh) runs it with `pytest -m gpu`.

Two checks per width (4, 3, 2 bits; at 3 bits the asm kernel runs the pure body): the unscaled
(q - z) 2^-E tiles of group_dequant_asm._group_d_asm and group_dequant._group_w_tile are the same
uint16 patterns (both are exact), and the GEMV outputs of gemv_group_asm_kernel and gemv_group_kernel
at the launcher's config are the same uint16 patterns (the same fp16 steps in the same order on the
same lanes; the reduction over the K lanes is the twin's own gemv_total).
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from mpsim.kernels.gemm_group import gemm_group
from mpsim.kernels.gemv_group import partial_exp
from mpsim.kernels.gemv_group_asm import ASM_SWITCH, asm_config
from mpsim.kernels.group_dequant import _group_w_tile
from mpsim.kernels.group_dequant_asm import _group_d_asm
from mpsim.kernels.launch_config import gemm_config, gemv_partial_trips
from mpsim.traces.accounting import padded_k

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (inline PTX)"),
]

GROUP = 128
# (K = 4000: padded to KP = 4096, the masked activation loads, EVEN_K False)
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (4096, 4000)]


@triton.jit
def _d_tiles_kernel(qw_ptr, s_ptr, z_ptr, out_ptr, out_asm_ptr, N, KP, stride_qn, stride_sn,
                    BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, E: tl.constexpr):
    """Both (q - z) 2^-E tiles of columns k0.. (z of k0's group) stored as fp16 (N, KP)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    k_group = k0 // GROUP * GROUP
    d = _group_w_tile(qw_ptr, s_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn, BITS, GROUP,
                      BLOCK_N, BLOCK_K, True, False, E, k_group)
    if BITS == 3:  # no asm form at 3 bits: the asm kernel runs the pure body
        d_asm = d
    else:
        d_asm = _group_d_asm(qw_ptr, z_ptr, offs_n, k0, N, KP, stride_qn, stride_sn, BITS, GROUP,
                             BLOCK_N, BLOCK_K, E, k_group)
    offs_k = k0 + tl.arange(0, BLOCK_K)
    where = offs_n[:, None] * KP + offs_k[None, :]
    mask = offs_n[:, None] < N
    tl.store(out_ptr + where, d, mask=mask)
    tl.store(out_asm_ptr + where, d_asm, mask=mask)


def _random_weight(n: int, k: int, bits: int, gen: torch.Generator):
    """Random packed words, scales and zeros of an N x k weight, packed at KP = k padded to G."""
    dev = torch.device("cuda")
    kp = padded_k(k, GROUP)
    words = torch.randint(-(2**31), 2**31, (n, kp * bits // 32), dtype=torch.int32, generator=gen,
                          device=dev)
    scales = (torch.rand(n, kp // GROUP, generator=gen, device=dev) * 0.01 + 1e-3).half()
    zeros = torch.randint(0, 1 << bits, (n, kp // GROUP), generator=gen, device=dev).half()
    return words, scales, zeros


@pytest.mark.parametrize("bits", [4, 3, 2])
def test_asm_dequant_tiles_are_the_twins_bits(bits: int) -> None:
    gen = torch.Generator(device="cuda").manual_seed(bits)
    n, k = 512, 1024
    words, scales, zeros = _random_weight(n, k, bits, gen)
    e = partial_exp(bits, gemv_partial_trips(bits, GROUP, 1, 32))
    out = torch.empty(n, k, dtype=torch.float16, device="cuda")
    out_asm = torch.full_like(out, float("nan"))
    _d_tiles_kernel[(n // 64, k // 32)](words, scales, zeros, out, out_asm, n, k, words.stride(0),
                                        scales.stride(0), BITS=bits, GROUP=GROUP, BLOCK_N=64,
                                        BLOCK_K=32, E=e)
    assert torch.equal(out.view(torch.int16), out_asm.view(torch.int16))


@pytest.mark.parametrize("bits", [4, 3, 2])
@pytest.mark.parametrize(("n", "k"), SHAPES)
def test_asm_gemv_is_the_twins_bits(bits: int, n: int, k: int,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ASM_SWITCH, "0")  # the twin run must be the pure kernel
    gen = torch.Generator(device="cuda").manual_seed(1000 * bits + n + k)
    words, scales, zeros = _random_weight(n, k, bits, gen)
    x = (torch.randn(1, k, generator=gen, device="cuda")).half()
    cfg = gemm_config(1, n, k, f"int{bits}-group", bits, GROUP, on_gpu=True)
    twin = gemm_group(x, words, scales, zeros, bits=bits, group_size=GROUP, config=cfg)
    fast = gemm_group(x, words, scales, zeros, bits=bits, group_size=GROUP,
                      config=asm_config(cfg, bits, GROUP))
    assert torch.isfinite(twin).all()
    assert torch.equal(twin.view(torch.int16), fast.view(torch.int16))
