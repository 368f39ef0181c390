"""vLLM's Marlin W4A16/W8A16 GEMM (`marlin_gemm` rows: gptq_marlin / awq_marlin) as CTA work.

Sources: IST-DASLab/marlin (marlin_cuda_kernel.cu) and vllm-project/vllm
csrc/quantization/gptq_marlin (gptq_marlin.cu, marlin_template.h, dequant.h). One CTA per SM (grid =
SMs), 256 threads (8 warps, mma.sync m16n8k16), a (thread_k x thread_n) weight tile per pipeline
stage (4 cp.async stages, weights fetched with an evict-first hint), 16..64 token rows per pass; the
(tile, K-slice) units are striped over the SMs and partial sums reduced serially in the output
through global locks (a stream-K). Dequant (dequant.h): int4 (u4b8) by 4 lop3 + 1 shift + 2 hsub2
+ 2 hfma2 per 8 weights, int8 (u8b128) by 2 prmt + 2 hsub2 per 4; the group scale one hmul2 per 2
weights; packed weights loaded from shared memory 128 bits at a time. Every warp converts, two
warps per scheduler and the next sub-tile's dequant interleaved with this one's MMAs: ASSUMPTION
cpi = half of TRT-LLM's fitted one (no published kernel-level Marlin rows to set it from); the
other latency constants are TRT-LLM fpA_intB's (assumption: same Hopper SM, same chain); its
mma.sync reaches an assumed 0.65 of the wgmma rate on Hopper.
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

MARLIN: WoKernel = replace(
    FPAINTB, name="marlin",
    lds_per_word=0.25,           # LDS.128: four packed words per load (marlin_template.h)
    cpi=FPAINTB.cpi / 2,         # ASSUMPTION: two warps per scheduler, dequant/MMA interleaved
    convert_threads_per_64=0,    # all 256 threads convert their fragments
    mma_eta=0.65,                # ASSUMPTION: Ampere-style mma.sync on Hopper does not reach the
                                 # wgmma dense rate (value not measured here)
)


def marlin_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, MARLIN, resident)
