"""DeepGEMM's fp8 block-scaled GEMM on Blackwell (sm_100): the layout its heuristic picks, for
`deepgemm_fp8_block_gemm` on a Blackwell GPU (TensorRT-LLM's `deepgemm` rows: fp8_swap_ab_gemm ->
deep_gemm.fp8_gemm_nt; vLLM's DeepGemmFp8BlockScaledMMKernel there). Hopper's heuristic:
mpsim/library/deepgemm.py.

Read from deepseek-ai/DeepGEMM csrc/jit_kernels/heuristics/sm100.hpp (SM100ArchSpec, at 0274ad7b):
the 1D1D kernel, tcgen05 MMAs with the UE8M0 block scales applied in the tensor core (no CUDA-core
promotion), BLOCK_K 128 fp8 values, 256 threads, persistent on the SMs. Candidates:
- not swapped: BLOCK_M 32 / 64 / 128 by M (<= 32, <= 64, else), BLOCK_N 16 and 32..256 by 32
  (..128 when K <= 256); clusters of 1, or 2 along M (`cluster_m`, when the M tiles pair up): the
  pair multicasts the weight tile, each CTA loading half of it (mpsim's `pair`);
- swapped (the weights on the UMMA's M side, 128 rows): BLOCK_M (tokens) 16..256 by 16, BLOCK_N
  128; clusters of 2 along N (`cluster_n`, when the N tiles pair up): the pair multicasts the
  token tile, each CTA loading half of it (mpsim's `pair_n`);
- tensor memory: the UMMA's N (BLOCK_N, or BLOCK_M swapped) plus the scale-factor columns
  (align(BLOCK_M, 128) / 32 + align(BLOCK_N, 128) / 32) within 512 columns.
The comparator: a single wave first, then a cluster of two, then fewer waves, then the fuller last
wave, then the smaller BLOCK_M + BLOCK_N, then the smaller BLOCK_M x BLOCK_N; the first of equals.
Stages: as many (<= 32) as fit 232,448 bytes after the C/D store tiles (two stages), the barriers
and the tensor-memory pointer, each stage both operands' K step (the pair's half of B) and their
scale factors.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.library.scaled_gemm import SCHED_PERSISTENT, scaled_config, wave_fill

BLOCK_K = 128
SMEM_CAPACITY = 232448
MAX_STAGES = 32
SMEM_BARRIERS = MAX_STAGES * 8 * 3 + 2 * 8 * 3 + 8 + 4  # the barriers and the tensor-memory pointer
TMEM_COLUMNS = 512
UMMA_M = 128      # the swapped kernel's weight rows (layout A/D's UMMA M)
STORE_ROWS = 128  # the C/D store tile's rows (16 swapped)


@dataclass(frozen=True)
class Sm100Layout:
    swap: bool
    block_m: int   # tokens
    block_n: int   # weight rows
    cluster_m: int
    cluster_n: int


def _candidates(m: int, n: int, k: int, sms: int) -> list[Sm100Layout]:
    out = []
    for swap in (False, True):
        if swap:
            block_ms, block_ns = list(range(16, 257, 16)), [UMMA_M]
        else:
            block_ms = [32] if m <= 32 else [64] if m <= 64 else [128]
            block_ns = [16, *range(32, (128 if k <= 256 else 256) + 1, 32)]
        for cm, cn in ((1, 1), (1, 2), (2, 1)):
            if (swap and cm > 1) or (not swap and cn > 1) or sms % (cm * cn):
                continue
            for bm in block_ms:
                if (bm // cn) % 8 or cdiv(m, bm) % cm:
                    continue
                for bn in block_ns:
                    if (bn // cm) % 8 or cdiv(n, bn) % cn:
                        continue
                    sf_cols = (cdiv(bm, 128) * 128 + cdiv(bn, 128) * 128) // 32
                    if (bm if swap else bn) + sf_cols > TMEM_COLUMNS:
                        continue
                    out.append(Sm100Layout(swap, bm, bn, cm, cn))
    return out


def _key(lay: Sm100Layout, m: int, n: int, sms: int) -> tuple[int, int, int, int, int, int]:
    """sm100.hpp's comparator as a sort key (smaller is better)."""
    waves, last = wave_fill(cdiv(m, lay.block_m) * cdiv(n, lay.block_n), sms)
    return (0 if waves == 1 else 1, -lay.cluster_m * lay.cluster_n, waves, -last,
            lay.block_m + lay.block_n, lay.block_m * lay.block_n)


def stages(lay: Sm100Layout) -> int:
    """The pipeline depth that fits the shared memory (get_pipeline_config, bf16 C/D)."""
    if lay.swap:
        smem_cd = 16 * lay.block_n * 2 * 2
    else:
        smem_cd = min(STORE_ROWS, lay.block_m) * min(128, lay.block_n * 2) * 2
    per_stage = ((lay.block_m // lay.cluster_n) + (lay.block_n // lay.cluster_m)) * BLOCK_K \
        + (cdiv(lay.block_m, 128) + cdiv(lay.block_n, 128)) * 128 * BLOCK_K // 32
    return min((SMEM_CAPACITY - smem_cd - SMEM_BARRIERS) // per_stage, MAX_STAGES)


def sm100_layout(m: int, n: int, k: int, sms: int) -> Sm100Layout:
    """The layout sm100.hpp picks (the first of the best)."""
    best, best_key = None, None
    for lay in _candidates(m, n, k, sms):
        key = _key(lay, m, n, sms)
        if best_key is None or key < best_key:
            best, best_key = lay, key
    if best is None:
        raise ValueError(f"DeepGEMM sm_100 has no layout for m={m}, n={n}, k={k}")
    return best


def deepgemm_sm100_config(kernel: str, m: int, n: int, k: int, sms: int) -> LaunchConfig:
    """`kernel` at the sm_100 layout: tcgen05 (`umma`), no CUDA-core promotion, a CTA pair sharing
    the weight tile (`pair`, cluster along M) or the token tile (`pair_n`, along N) as it clusters."""
    lay = sm100_layout(m, n, k, sms)
    return scaled_config(kernel, m, n, lay.block_m, lay.block_n, BLOCK_K, SCHED_PERSISTENT, sms,
                         swap_ab=lay.swap, umma=True, pair=lay.cluster_m == 2,
                         pair_n=lay.cluster_n == 2, warps=8, stages=max(1, stages(lay)))
