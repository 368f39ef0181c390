"""DeepGEMM's fp8 block-scaled GEMM as CTA work (names, configs and row builders:
mpsim/library/deepgemm.py); the work model is mpsim/sim/gpu/library/scaled_gemm.py's. Constants:
DeepgemmParams, SimParams.deepgemm.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.library.deepgemm import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, room_work


@dataclass(frozen=True)
class DeepgemmParams(ScaledGemmParams):
    """SimParams.deepgemm (`--fit-params deepgemm.NAME`): mma_eta fitted on H200 fp8_block rows of
    vLLM 0.24.0, SGLang 0.5.14 and TRT-LLM 1.3.0rc20 (`--select fp8`, 200 sampled per file);
    promote_ops one FFMA per accumulator element per 128-deep block (DeepGEMM's README: the fp8
    partial sums promoted on the CUDA cores; the fit kept 1.0 over 0.5 and 2.0); tile_ns cuBLAS's
    (the fit kept it)."""

    mma_eta: float = 0.95


WORK = dict.fromkeys(KERNELS, room_work("deepgemm"))
