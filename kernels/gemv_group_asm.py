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

from mpsim.kernels.gemm_common import gemv_program, gemv_total, loop_stages, splitk_finish
from mpsim.kernels.gemv_group import gemv_group_kernel, partial_exp, partial_trips
from mpsim.kernels.group_dequant_asm import _d_asm
from mpsim.kernels.launch_config import LaunchConfig, gemv_partial_trips

ASM_KERNEL = "gemv_group_asm_kernel"
ASM_SWITCH = "MPSIM_GEMV_ASM"


@triton.jit
def _partial_sums_asm(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, stride_qn, stride_sn,
                      BITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, T: tl.constexpr, EVEN_K: tl.constexpr,
                      LOOP_STAGES: tl.constexpr = 0):
    """gemv_group._partial_sums with (q - z) 2^-E from inline PTX, the same steps per lane in the
    same order; the word and activation pointers advance with the loop (no per-trip address math),
    and with EVEN_K (K == KP: no padded columns) x loads without a mask (a masked load zeroes its
    registers first). sm_90a, 256 x 32, slots per weight at 2 / 3 / 4 bits: 2.86 / 3.07 / 2.93 with
    the twin's loop structure, 2.68 / 2.89 / 2.75 with the pointers, 2.50 / 2.71 / 2.55 unmasked."""
    E: tl.constexpr = partial_exp(BITS, T)
    NC: tl.constexpr = BLOCK_K // 32
    rows = tl.minimum(offs_n, N - 1)  # unmasked loads: rows past N are never stored
    w_ptrs = qw_ptr + rows[:, None] * stride_qn + BITS * (k_lo // 32 + tl.arange(0, NC))[None, :]
    z_row = z_ptr + rows[:, None] * stride_sn + tl.arange(0, 1)[None, :]
    offs_k = k_lo + tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K * T, num_stages=loop_stages(LOOP_STAGES)):
        z = tl.load(z_row + k0 // GROUP)
        p = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float16)
        for t in tl.static_range(T):
            d = _d_asm(w_ptrs + t * NC * BITS, z, BITS, BLOCK_N, BLOCK_K, E)
            if EVEN_K:  # every column of a run is < KP == K
                x = tl.load(x_ptr + offs_k + t * BLOCK_K)
            else:
                x = tl.load(x_ptr + offs_k + t * BLOCK_K, mask=offs_k + t * BLOCK_K < K,
                            other=0.0)
            p += d * x[None, :]
        s = tl.load(s_ptr + offs_n * stride_sn + k0 // GROUP, mask=offs_n < N, other=0.0)
        acc += p.to(tl.float32) * (s.to(tl.float32) * (1 << E))[:, None]
        w_ptrs += T * NC * BITS
        offs_k += BLOCK_K * T
    return acc


@triton.jit
def gemv_group_asm_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, bias_ptr, out_ptr, ws_ptr, cnt_ptr,
                          M, N, K, KP, K_PER_SPLIT,
                          stride_xm, stride_qn, stride_sn, stride_om,
                          BITS: tl.constexpr, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, LOOP_STAGES: tl.constexpr = 0):
    """gemv_group_kernel's partial-sum path (one row), with ASM dequantization; EVEN_K: K == KP
    (the launcher's `asm_args`); LOOP_STAGES as gemv_group_kernel's."""
    tl.static_assert(BLOCK_M == 1)
    pid_n, pid_k, offs_n, offs_m, k_lo, k_hi = gemv_program(K_PER_SPLIT, KP, BLOCK_N, BLOCK_M)
    T: tl.constexpr = partial_trips(BITS, GROUP, BLOCK_M, BLOCK_K)
    tl.static_assert(T > 1)
    acc = _partial_sums_asm(x_ptr, qw_ptr, s_ptr, z_ptr, offs_n, k_lo, k_hi, N, K, stride_qn,
                            stride_sn, BITS, GROUP, BLOCK_N, BLOCK_K, T, EVEN_K, LOOP_STAGES)
    splitk_finish(gemv_total(acc, BLOCK_M), out_ptr, bias_ptr, ws_ptr, cnt_ptr, offs_m, offs_n,
                  pid_n, pid_k, M, N, stride_om, HAS_BIAS, SPLIT_K)


def asm_config(cfg: LaunchConfig, bits: int, group: int | None) -> LaunchConfig:
    """cfg (a gemv_group_kernel config) on the asm kernel; ValueError where it has no asm path."""
    if not takes_asm(cfg, bits, group):
        raise ValueError(f"{ASM_KERNEL}: {cfg.name()} at {bits} bits, group {group} does not take "
                         "the one-row fp16 partial sums (one row, 2..4 bits, BLOCK_K < group)")
    return dataclasses.replace(cfg, kernel=ASM_KERNEL)


def asm_args(k: int, kp: int) -> dict[str, bool]:
    """The asm kernel's arguments beyond gemv_group_kernel's: EVEN_K (no padded columns)."""
    return {"EVEN_K": k == kp}


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
