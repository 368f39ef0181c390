"""LMDeploy TurboMind's W4A16 GEMM (`turbomind_gemm` rows) as CTA work (name, candidate configs and
row builder: mpsim/library/turbomind.py). Mostly ASSUMPTION.

Row: op gemm, w_format int4-group / int8-group (AWQ: group 128); config one of the candidates
(token tile, weight tile, K tile, stages, data-parallel or split-K).

Source: InternLM/lmdeploy src/turbomind/kernels/gemm: mma.sync m16n8k16 kernels, u4 weights with
group-128 scales and zeros converted offline into the MMA fragment layout, in-register dequant,
split-K, a dispatcher picking the kernel by a cost estimate or a tuning cache. Stated from that
design: every thread converts its fragments; split-K over whole K tiles. ASSUMPTIONS: one more
fp16x2 op per 2 weights for the zero point (w * s - z * s fused); Marlin's converter counts
otherwise and its latency params (TurbomindParams; same mma.sync structure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.library.turbomind import TURBOMIND_GEMM
from mpsim.sim.gpu.library.marlin import MARLIN, MarlinParams
from mpsim.sim.gpu.library.wo_tiled import Converter, wo_tiled_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

TURBOMIND: Converter = replace(MARLIN, name="turbomind",
                               fma_per_w4=MARLIN.fma_per_w4 + 0.5,   # ASSUMPTION: zero-point fma
                               fma_per_w8=MARLIN.fma_per_w8 + 0.5)


@dataclass(frozen=True)
class TurbomindParams(MarlinParams):
    """TurboMind's main-loop latencies; SimParams.turbomind. ASSUMPTION: Marlin's."""


def turbomind_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, TURBOMIND, p.turbomind, resident)


WORK = {TURBOMIND_GEMM: turbomind_work}
