"""TensorRT-LLM's fp8 (cuBLASLt) and nvfp4 GEMMs as CTA work (names, configs and row builders: mpsim/library/trtllm_fp8.py); the work model
is mpsim/sim/gpu/library/scaled_gemm.py's. Constants: TrtllmFp8Params, SimParams.trtllm_fp8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.library.trtllm_fp8 import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, scaled_gemm_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class TrtllmFp8Params(ScaledGemmParams):
    """SimParams.trtllm_fp8 (`--fit-params trtllm_fp8.NAME`)."""


def trtllm_fp8_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> LaunchWork:
    return scaled_gemm_work(row, cfg, r, p.trtllm_fp8, p.fp8_act, resident)


WORK = dict.fromkeys(KERNELS, trtllm_fp8_work)
