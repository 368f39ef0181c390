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
    (the fit kept it); chain_cycles, a lone math warpgroup's trip at the least (its wgmma chain
    and promotion per 128-deep block, BLOCK_M <= 64; SGLang's rows on 16-wide weight tiles take
    125-155 ns a K step at M <= 16, whatever N up to 2048), set on the even halves of the H200
    SGLang 0.5.14 fp8_block rows, 1,000 sampled per selection: `--select fp8` (n, k >= 2048) 0 /
    180 / 220 / 240 / 260 / 300 gave 12.7 / 12.3 / 11.9 / 11.6 / 11.4 / 11.5%, `stacks` (every
    shape) 15.8 / 14.2 / 13.8 / 13.8 / 14.0 / 14.9%; checked on TensorRT-LLM 1.3.0rc20's (its
    vendored copy takes these constants: 7.55 -> 7.54% and 11.52 -> 11.47%)."""

    mma_eta: float = 0.95
    chain_cycles: float = 240.0


WORK = dict.fromkeys(KERNELS, room_work("deepgemm"))
