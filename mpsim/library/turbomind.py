"""LMDeploy TurboMind's W4A16 GEMM: its kernel name, candidate configs and row builder
(`gemm_row(..., kernel=TURBOMIND_GEMM)`); priced by mpsim/sim/gpu/library/turbomind.py.

Source: InternLM/lmdeploy src/turbomind/kernels/gemm (mma.sync kernels, AWQ u4 weights converted
offline to the fragment layout, split-K, a dispatcher choosing by estimated cost or a tuning
cache). ASSUMPTION: the candidate tiles below are a representative set, not counted from the
source; the model-guided search stands for the dispatcher.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.rows import Row
from mpsim.library.wo_tiled import SCHED_DP, SCHED_SPLIT_K, check_format, wave_pick, wo_config, wo_row

TURBOMIND_GEMM = "turbomind_gemm"
KERNELS = (TURBOMIND_GEMM,)
# (token tile, weight tile, K tile, stages): ASSUMPTION
TURBOMIND_TILES = ((16, 128, 128, 4), (32, 128, 128, 4), (64, 128, 64, 4), (128, 128, 64, 3),
                   (128, 256, 32, 3))
TURBOMIND_SPLITS = (1, 2, 4)


def candidates(m: int, n: int, k: int, bits: int, group: int, sms: int = GPU_SMS,
               arch: str = "hopper") -> list[LaunchConfig]:
    """Token tile x weight tile x K tile and stages, data-parallel or split-K over whole K tiles."""
    out = []
    for tt, wt, bk, stages in TURBOMIND_TILES:
        for s in TURBOMIND_SPLITS:
            if k % (bk * s) == 0:
                out.append(wo_config(TURBOMIND_GEMM, m, n, k, bits, tt, wt, bk, stages,
                                     SCHED_DP if s == 1 else SCHED_SPLIT_K, 256, s, sms))
    if not out:
        raise ValueError(f"{TURBOMIND_GEMM}: K={k} is not a multiple of a K tile (32)")
    return out


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `turbomind_gemm` row: int4/int8 weights (group 128 for AWQ), config or wave_pick's."""
    check_format(kernel, fmt)
    cfg = config or wave_pick(candidates(m, n, k, bits, group_size or k, sms), m, sms)
    return wo_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg)
