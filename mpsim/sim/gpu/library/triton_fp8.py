"""vLLM's Triton W8A8 block-scaled fp8 GEMM as CTA work (names, configs and row builders:
mpsim/library/triton_fp8.py); the work model is mpsim/sim/gpu/library/scaled_gemm.py's `sm89_part`
(Ada's mma.sync tiles) with the per-K-step promotion. Constants: TritonFp8Params,
SimParams.triton_fp8.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpsim.library.triton_fp8 import KERNELS
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, room_work


@dataclass(frozen=True)
class TritonFp8Params(ScaledGemmParams):
    """SimParams.triton_fp8 (`--fit-params triton_fp8.NAME`). promote_ops 2: the kernel's
    `accumulator += dot * a_s[:, None] * b_s[None, :]` is a multiply and a fused multiply-add per
    accumulator element per 128-deep K step (read from its source; the SASS was not counted).
    sm89_mma_eta 0.7: the main loop's share of the fp8 rate, fitted on the even half of an 800-row
    sample of the L40S vLLM 0.24.0 fp8_block rows (`--select fp8`; 0.70-0.72 within 0.1 point,
    4.0 or 6.0 promote_ops in its place left -9..-12% bias); the odd half's M 257-8192 band 17.8
    -> 6.6% MAPE (bias -16.1 -> -0.7%). The default config's 2-stage pipeline (64 x 128 x 128, 4
    warps) is what it stands for; one kernel on one device. Epilogue at the scaled rooms' default."""

    promote_ops: float = 2.0
    sm89_mma_eta: float = 0.7


WORK = dict.fromkeys(KERNELS, room_work("triton_fp8"))
