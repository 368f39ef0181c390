"""FlashInfer's fp8 block-scaled (swap-AB) and CuTe-DSL nvfp4 GEMMs as CTA work (names, configs and row
builders: mpsim/library/flashinfer_gemm.py); the work model is
mpsim/sim/gpu/library/scaled_gemm.py's. Constants: FlashinferGemmParams, SimParams.flashinfer_gemm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.library.flashinfer_gemm import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, scaled_gemm_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class FlashinferGemmParams(ScaledGemmParams):
    """SimParams.flashinfer_gemm (`--fit-params flashinfer_gemm.NAME`): none fitted (the defaults of
    ScaledGemmParams: the full dense rate, cuBLAS's per-tile epilogue, one promotion FFMA per
    accumulator element per block)."""


def flashinfer_gemm_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> LaunchWork:
    return scaled_gemm_work(row, cfg, r, p, p.flashinfer_gemm, resident)


WORK = dict.fromkeys(KERNELS, flashinfer_gemm_work)
