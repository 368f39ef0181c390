"""vLLM's Machete W4A16/W8A16 GEMM for Hopper (`machete_gemm` rows) as CTA work (name, tile
heuristic and row builder: mpsim/library/machete.py).

Row: op gemm, w_format int4-group / int8-group, group-wise or per channel; config `machete_config`
(block_n = weight tile 128|256, block_m = token tile 16..256, block_k 64, stream-K `sched`).

Source: vllm-project/vllm csrc/quantization/machete (Readme.md, generate.py, machete_mainloop.cuh,
machete_prepacked_layout.cuh): a CUTLASS 3 sm90 mixed-input kernel, weights prepacked offline so a
thread's shared-memory load lands in the wgmma A-register layout without shuffles, converted in
registers (the lop3 / prmt magic-number converters) and multiplied by the group scale; cooperative
schedule (one consumer warpgroup per 64 weight rows), StreamK scheduler. MacheteParams are
ASSUMPTIONS (no Machete rows published): TRT-LLM fpA_intB's fitted latencies (the same CUTLASS
register-sourced mixed-input main loop), no per-launch cost beyond the protocol's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.library.machete import MACHETE_GEMM
from mpsim.sim.gpu.library.trtllm_fpaintb import FPAINTB
from mpsim.sim.gpu.library.wo_tiled import Converter, WoLoop, wo_tiled_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

MACHETE: Converter = replace(FPAINTB, name="machete", lds_per_word=0.25)  # 128-bit prepacked loads


@dataclass(frozen=True)
class MacheteParams(WoLoop):
    """Machete's main-loop latencies; SimParams.machete. ASSUMPTIONS (see the module docstring)."""

    fixed_ns: float = 0.0


def machete_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, MACHETE, p.machete, resident)


WORK = {MACHETE_GEMM: machete_work}
