"""vLLM's Machete W4A16/W8A16 GEMM for Hopper (`machete_gemm` rows) as CTA work.

Source: vllm-project/vllm csrc/quantization/machete (Readme.md, generate.py, machete_mainloop.cuh,
machete_prepacked_layout.cuh): a CUTLASS 3 sm90 mixed-input kernel, weights pre-shuffled offline
(prepack) so that a thread's shared-memory load lands in the wgmma A-register layout without
shuffles, converted in registers (the same lop3 / prmt magic-number converters) and multiplied by
the group scale; cooperative schedule (two consumer warpgroups per 128 weight rows), StreamK tile
scheduler, tiles by the generated heuristic (kernels/wo_gemm_configs.py machete_tile). The
converter counts are the library's; the latency constants are TRT-LLM fpA_intB's fitted ones
(ASSUMPTION: the same CUTLASS register-sourced mixed-input main loop; no Machete rows published),
with one 128-bit shared-memory load per four packed words (the prepacked layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mpsim.sim.gpu.fpaintb_work import FPAINTB
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.wo_tiled import WoKernel, wo_tiled_work
from mpsim.sim.gpu.work import LaunchWork
from mpsim.sim.params import SimParams

MACHETE: WoKernel = replace(FPAINTB, name="machete", lds_per_word=0.25)


def machete_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, MACHETE, resident)
