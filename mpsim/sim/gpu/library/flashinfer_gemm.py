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
    """SimParams.flashinfer_gemm (`--fit-params flashinfer_gemm.NAME`): the defaults of
    ScaledGemmParams (the full dense rate, cuBLAS's per-tile epilogue, one promotion FFMA per
    accumulator element per block), except the nvfp4 kernel's fp4 MMA share, `fp4_mma_eta`: until
    stop 54 SimParams.fp4_mma_eta (0.583, set on TensorRT-LLM's untuned 1-SM tile), which priced
    vLLM's FlashInfer CuTe DSL rows +5.1% slow at M 257-8192; 0.583 x 1.0 / 1.05 / 1.1 / 1.15 / 1.2
    on the even half (sorted by M, K, N) of a 2,000-row `--select fp8` sample of the B200 vLLM 0.24.0
    nvfp4 rows (b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet): 8.91 / 8.33 / 8.19 / 8.32 / 8.62%, odd
    half 8.76 -> 8.01% at 1.1, M 257-8192 10.4 -> 8.6%. One kernel on one device (the only one with
    fp4 tensor cores), its 2-SM tiles reaching more of the rate than TensorRT-LLM's 1-SM one."""

    fp4_mma_eta: float | None = 0.641


WORK = dict.fromkeys(KERNELS, room_work("flashinfer_gemm"))
