"""FlashInfer's fp8 block-scaled (swap-AB) and CuTe-DSL nvfp4 GEMMs as CTA work (names, configs and row
builders: mpsim/library/flashinfer_gemm.py); the work model is
mpsim/sim/gpu/library/scaled_gemm.py's. Constants: FlashinferGemmParams, SimParams.flashinfer_gemm.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.library.flashinfer_gemm import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, room_work


@dataclass(frozen=True)
class FlashinferGemmParams(ScaledGemmParams):
    """SimParams.flashinfer_gemm (`--fit-params flashinfer_gemm.NAME`): none fitted (the defaults of
    ScaledGemmParams: the full dense rate, cuBLAS's per-tile epilogue, one promotion FFMA per
    accumulator element per block); the nvfp4 kernel's MMAs at SimParams.fp4_mma_eta of it, set on
    TensorRT-LLM's rows."""


WORK = dict.fromkeys(KERNELS, room_work("flashinfer_gemm"))
