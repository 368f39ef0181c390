"""The one-row group GEMV with its dequantization in inline PTX: `gemv_group_asm_kernel` (GPU only).

The pure-Triton `gemv_group_kernel` (gemv_group.py) is its twin: the same fp16 partial sums, with
(q - z) 2^-E taken by group_dequant_asm.py (one lop3 per code pair, one shift per word, one
sub.f16x2 per pair) instead of one shift and one mask per pair, the same values bit for bit
(tests/kernels/test_kern_gemv_asm_gpu.py checks it on a GPU; the GPU kit runs it). Taken only on a
GPU, only when MPSIM_GEMV_ASM=1 (kernels/gemm_group.py's launcher switch, off by default), only for
the configs that take the partial sums (one activation row, 2..4 bits, K tiles narrower than the
group); the interpreter never takes it (it cannot run inline asm). At 3 bits the asm kernel runs
the pure body (no asm form yet).
"""

from __future__ import annotations

import dataclasses
import os

import triton
import triton.language as tl

from mpsim.kernels.gemm_common import gemv_total, splitk_finish
from mpsim.kernels.gemv_group import _partial_sums, gemv_group_kernel, partial_trips
from mpsim.kernels.launch_config import LaunchConfig, gemv_partial_trips

ASM_KERNEL = "gemv_group_asm_kernel"
ASM_SWITCH = "MPSIM_GEMV_ASM"


@triton.jit
def gemv_group_asm_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                          M, N, K, KP, K_PER_SPLIT,
                          stride_xm, stride_qn, stride_sn, stride_om,
                          BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          SPLIT_K: tl.constexpr):
    """gemv_group_kernel's partial-sum path (one row), with ASM dequantization."""
    tl.static_assert(BLOCK_M == 1)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    k_lo = pid_k * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, KP)
    T: tl.constexpr = partial_trips(BITS, GROUP, BLOCK_M, BLOCK_K)
    tl.static_assert(T > 1)
    acc = _partial_sums(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, KP, stride_qn,
                        stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, T, True)
    splitk_finish(gemv_total(acc, BLOCK_M), out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)


def asm_config(cfg: LaunchConfig, bits: int, group: int | None) -> LaunchConfig:
    """cfg (a gemv_group_kernel config) on the asm kernel; ValueError where it has no asm path."""
    if not takes_asm(cfg, bits, group):
        raise ValueError(f"{ASM_KERNEL}: {cfg.name()} at {bits} bits, group {group} does not take "
                         "the one-row fp16 partial sums (one row, 2..4 bits, BLOCK_K < group)")
    return dataclasses.replace(cfg, kernel=ASM_KERNEL)


def takes_asm(cfg: LaunchConfig, bits: int, group: int | None) -> bool:
    """Whether cfg runs the one-row partial sums, the only path with an asm form."""
    return (cfg.kernel == gemv_group_kernel.__name__ and cfg.block_m == 1 and bool(group)
            and gemv_partial_trips(bits, group or 0, 1, cfg.block_k or 0) > 1)


def switch_on() -> bool:
    """MPSIM_GEMV_ASM: '1' takes the asm kernel on a GPU, '0' or unset the pure-Triton one."""
    value = os.environ.get(ASM_SWITCH, "0")
    if value not in ("0", "1"):
        raise ValueError(f"{ASM_SWITCH}={value!r}: expected '0' or '1'")
    return value == "1"
