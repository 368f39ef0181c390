"""CUTLASS fp8 GEMMs (vLLM's and SGLang's scaled_mm, vLLM's blockwise kernel) as CTA work (names,
configs and row builders: mpsim/library/cutlass_fp8.py); the work model is
mpsim/sim/gpu/library/scaled_gemm.py's. Constants: CutlassFp8Params, SimParams.cutlass_fp8.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.library.cutlass_fp8 import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, room_work


@dataclass(frozen=True)
class CutlassFp8Params(ScaledGemmParams):
    """SimParams.cutlass_fp8 (`--fit-params cutlass_fp8.NAME`): mma_eta and tile_ns fitted on H200
    vLLM 0.24.0 and SGLang 0.5.14 fp8 rows (`--select fp8`, 200 sampled per file); promote_ops
    (the blockwise kernel's CUDA-core promotion, one FFMA per accumulator element per 128-deep block)
    from DeepGEMM's design. sm89_tile_ns: vLLM's CUTLASS 2.x kernels on Ada (`sm89_part`) pay about
    8 us per 128 x 128 outputs of a tile beyond the main loop (the L40S rows' time grows with K from
    a large intercept: M 4096, N 8192 takes 497 / 654 / 943 us at K 1024 / 2048 / 4096, where
    cuBLASLt's fp8 kernel takes 217 / 438 / 722); fitted on the even half of an 800-row sample of
    the L40S vLLM 0.24.0 fp8 rows (`--select fp8`; 7000-8500 within 0.1 point), the odd half
    12.4 -> 9.6% MAPE. Its cause (the epilogue's scale visitor, the tile raster) is not known: an
    Ada-only constant, one device."""

    mma_eta: float = 0.8
    tile_ns: float = 300.0
    sm89_tile_ns: float = 8000.0


WORK = dict.fromkeys(KERNELS, room_work("cutlass_fp8"))
