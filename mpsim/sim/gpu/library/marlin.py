"""vLLM's Marlin W4A16/W8A16 GEMM (`marlin_gemm` rows: gptq_marlin / awq_marlin) as CTA work (name,
configs and row builder: mpsim/library/marlin.py).

Row: op gemm, w_format int4-group / int8-group, group_size 128 or k (per channel); config
`marlin_config` (block_m = 16..64 token rows, block_n = thread_n, block_k = thread_k, 4 stages,
stream-K `sched`).

Sources: IST-DASLab/marlin and vllm-project/vllm csrc/quantization/gptq_marlin (gptq_marlin.cu,
marlin_template.h, dequant.h): one CTA per SM, 256 threads (8 warps, mma.sync m16n8k16), a
thread_k x thread_n weight tile per stage, weights fetched with an evict-first hint, (tile, K-slice)
units striped over the SMs and reduced serially through global locks. Dequant (dequant.h): int4
(u4b8) by 4 lop3 + 1 shift + 2 hsub2 + 2 hfma2 per 8 weights, int8 (u8b128) by 2 prmt + 2 hsub2 per
4; the group scale one hmul2 per 2 weights; packed weights loaded 128 bits at a time.
MarlinParams are ASSUMPTIONS (no kernel-level Marlin rows are published): see each comment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.library.marlin import MARLIN_GEMM
from mpsim.sim.gpu.library.trtllm_fpaintb import FPAINTB
from mpsim.sim.gpu.library.wo_tiled import Converter, WoLoop, wo_tiled_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

MARLIN: Converter = replace(FPAINTB, name="marlin",
                            lds_per_word=0.25,          # LDS.128: four packed words a load
                            convert_threads_per_64=0)   # all 256 threads convert their fragments


@dataclass(frozen=True)
class MarlinParams(WoLoop):
    """Marlin's main-loop latencies; SimParams.marlin (`--fit-params marlin.NAME`). ASSUMPTIONS:
    cpi half of TRT-LLM fpA_intB's fitted 8.5 (two warps per scheduler, the next sub-tile's dequant
    interleaved with this one's MMAs); the other latencies fpA_intB's; no per-launch cost beyond
    the protocol's (vLLM runs it in a CUDA graph); mma.sync reaches 0.65 of the wgmma dense rate on
    Hopper (not measured here)."""

    cpi: float = 4.25
    fixed_ns: float = 0.0
    mma_eta: float = 0.65


def marlin_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, MARLIN, p.marlin, resident)


WORK = {MARLIN_GEMM: marlin_work}
