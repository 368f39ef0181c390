"""DeepGEMM's fp8 block-scaled GEMM (`deepgemm_fp8_block_gemm`: 1x128 activation and 128x128 weight
scales, bf16 output) as vLLM (DeepGemmFp8BlockScaledMMKernel, M >= 32), SGLang (gemm_nt_f8f8bf16)
and TensorRT-LLM (fp8_block_scaling_gemm on Hopper, DeepGEMM's design; `deepgemm` rows on
Blackwell) run it. Work model: mpsim/sim/gpu/library/deepgemm.py.

Design (deepseek-ai/DeepGEMM README and csrc/jit_kernels/heuristics/sm90.hpp, commit 10747d47):
one persistent CTA per SM (grid = SMs, tiles walked in order), a TMA producer warpgroup and one
(BLOCK_M <= 64) or two math warpgroups, BLOCK_K = 128 (one scale block per K step), tokens on the
wgmma M side (64 rows: a BLOCK_M of 16 or 32 still issues 64-row MMAs), and on Hopper the partial
sums of each 128-deep block promoted into fp32 registers with their two scales on the CUDA cores
(the "1D2D" kernel; Blackwell's UMMA applies block scales in the tensor core). `deepgemm_config`
is its heuristic: BLOCK_M in {64, 128, 256} (+16 when M <= 16, +32 when M <= 32), BLOCK_N 16..192
in steps of 16 (the 1D2D kernel's register bound; unroll rule: BLOCK_N <= 128, or BLOCK_N - 128
divides BLOCK_N or 128), not both above 128, at least 3 pipeline stages in 232,448 bytes of
shared memory (4 below 128 x 192); the layout with the fewest modelled L1/L2 cycles divided by
the last wave's SM share wins. Thread-block clusters (multicast) are left out (ASSUMPTION: they
change L2 traffic only; DeepGEMM disables them for one wave). On Blackwell (sm_100) the kernel and
its heuristic are others: mpsim/library/deepgemm_sm100.py.
"""

from __future__ import annotations

import math

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.deepgemm_sm100 import deepgemm_sm100_config
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import SCHED_PERSISTENT, scaled_config, scaled_row

DEEPGEMM_FP8_BLOCK_GEMM = "deepgemm_fp8_block_gemm"
KERNELS = (DEEPGEMM_FP8_BLOCK_GEMM,)
BLOCK_K = 128
SMEM_CAPACITY = 232448
MAX_STAGES = 16
BLOCK_N_END = 192  # Kernel1D2D: register spills above


def _align(x: int, a: int) -> int:
    return cdiv(x, a) * a


def _stages(m_blk: int, n_blk: int, k: int) -> int:
    """DeepGEMM's pipeline stages for a layout (get_pipeline_config, bf16 output, 1D2D kernel)."""
    smem_cd = _align(m_blk * n_blk * 2, 1024)
    uniform = 1 if BLOCK_K % n_blk == 0 else 2
    extra = smem_cd + MAX_STAGES * 16 + _align(cdiv(k, BLOCK_K) * 4 * uniform, 8)
    per_stage = m_blk * BLOCK_K + n_blk * BLOCK_K + _align(m_blk * 4, 128)
    return min((SMEM_CAPACITY - extra) // per_stage, MAX_STAGES)


def _cycles(m: int, n: int, k: int, m_blk: int, n_blk: int, sms: int) -> float:
    """DeepGEMM's layout cost (get_layout_info): max(L1, L2 cycles) / wave efficiency."""
    blocks = cdiv(m, m_blk) * cdiv(n, n_blk)
    waves = cdiv(blocks, sms)
    l2_bw, l1_bw = min(64.0 * sms, 8e6 / 1.3e3), 128.0 * sms
    cd = m_blk * n_blk * 2
    l2 = (k * (m_blk + n_blk) + cd) * blocks / l2_bw
    l1 = (k * (m_blk + n_blk) + k * (max(64, m_blk) + n_blk) + cd + cd) * blocks / l1_bw
    return max(l1, l2) / (blocks / (waves * sms))


def layouts(m: int, k: int) -> list[tuple[int, int, int]]:
    """(BLOCK_M, BLOCK_N, stages) of every legal layout, in DeepGEMM's enumeration order."""
    block_ms = [64, 128] + ([16] if m <= 16 else []) + ([32] if m <= 32 else []) + [256]
    out = []
    for m_blk in block_ms:
        for n_blk in range(16, BLOCK_N_END + 1, 16):
            if n_blk > BLOCK_K and n_blk % (n_blk - BLOCK_K) and BLOCK_K % (n_blk - BLOCK_K):
                continue
            if m_blk > 128 and n_blk > 128:
                continue
            stages = _stages(m_blk, n_blk, k)
            if stages < 3 or (m_blk * n_blk < 128 * 192 and stages < 4):
                continue
            out.append((m_blk, n_blk, stages))
    return out


def deepgemm_config(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """The layout DeepGEMM's heuristic picks (first of the cheapest, as its strict comparator)."""
    best, best_cost = None, math.inf
    for m_blk, n_blk, stages in layouts(m, k):
        cost = _cycles(m, n, k, m_blk, n_blk, sms)
        if cost < best_cost:
            best, best_cost = (m_blk, n_blk, stages), cost
    if best is None:
        raise ValueError(f"DeepGEMM has no layout for m={m}, k={k}")
    m_blk, n_blk, stages = best
    warps = 4 + (4 if m_blk <= 64 else 8)
    return scaled_config(DEEPGEMM_FP8_BLOCK_GEMM, m, n, m_blk, n_blk, BLOCK_K, SCHED_PERSISTENT, sms,
                         promote=True, warps=warps, stages=stages)


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS,
               generation: str = "hopper") -> list[LaunchConfig]:
    """The config of the library's fixed dispatch (Hopper and Blackwell only)."""
    if generation == "ampere":
        raise ValueError(f"{kernel}: DeepGEMM runs on sm_90 / sm_100, not on Ampere or Ada "
                         "(sm_80 / sm_89)")
    if generation == "blackwell":
        return [deepgemm_sm100_config(kernel, m, n, k, sms)]
    return [deepgemm_config(m, n, k, sms)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A DeepGEMM row (fp8-block weights, fp8 1x128 activations), its Hopper heuristic's layout by
    default (on a GPU by architecture: library.ARCH_CONFIGS, sm_100's in deepgemm_sm100.py)."""
    cfg = config or deepgemm_config(m, n, k, sms)
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8-block",))
