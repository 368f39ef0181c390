"""LMDeploy TurboMind's W4A16 GEMM (`turbomind_gemm` rows) as CTA work. Mostly ASSUMPTION.

Source: InternLM/lmdeploy src/turbomind/kernels/gemm (a templated GEMM library: mma.sync
m16n8k16 kernels for sm80+, u4 AWQ weights with group-128 scales and zeros converted offline into
the MMA fragment layout, in-register dequant, split-K, a dispatcher that picks the kernel by a
cost estimate or a tuning cache). What is stated here from that design: every thread converts its
fragments, split-K over whole K tiles, group scales and zeros read with the weights (4 bytes per
group of 128: fp16 scale + fp16 zero). ASSUMPTIONS (no published kernel-level rows, and the tile
list was not counted from the source): the candidate tiles in kernels/wo_gemm_configs.py
TURBOMIND_TILES; one extra hfma2 per 2 weights for the zero point (scale and zero fused as
w * s - z * s); the latency constants of Marlin's model (same mma.sync structure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mpsim.sim.gpu.marlin_work import MARLIN
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.wo_tiled import WoKernel, wo_tiled_work
from mpsim.sim.gpu.work import LaunchWork
from mpsim.sim.params import SimParams

TURBOMIND: WoKernel = replace(MARLIN, name="turbomind",
                              fma_per_w4=MARLIN.fma_per_w4 + 0.5,   # ASSUMPTION: zero-point fma
                              fma_per_w8=MARLIN.fma_per_w8 + 0.5)


def turbomind_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, TURBOMIND, resident)
