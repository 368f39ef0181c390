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
    from DeepGEMM's design. vLLM's CUTLASS 2.x kernels on Ada (`sm89_part`), three constants of one
    kernel on one device (L40S vLLM 0.24.0 fp8 rows; causes not known): sm89_store_cost, the output
    streams to DRAM at 1.4 bytes a byte whether or not it fits the 96 MB L2 (K = 32 rows: 370-400
    GB/s for the 4-warp 128 x 128 tiles, M 2048 x N 16384's 67 MB at 372, M 8192 x N 10240's 168 MB
    at 378, where cuBLAS's bf16 and cuBLASLt's fp8 outputs that fit run at 1.1-1.9 TB/s);
    sm89_store_cost_8warp, 3.2 for the 8-warp 256 x 128 tile (156-168 GB/s at M >= 2048);
    sm89_tile_ns, 4000 ns per 128 x 128 outputs of a tile beyond the main loop (the time grows with
    K from a large intercept). Set together on the even halves of two 800-row samples (default
    seed; `--select stacks` and `--select fp8`, fp8 rows), from the stop-42 8000 ns alone (even
    halves 15.3 / 9.9%): 4000 / 1.4 / 3.2 gives 13.2 / 10.3%, 5000 / 1.3 / 2.8 13.5 / -, 6000 / 1.3
    / 2.8 14.4 / 9.8%; without the tile latency the `fp8` half is 11.9-12.7% (stores at 1.2-1.6 /
    2.5-4.0). Odd halves 15.2 -> 13.5%, 9.9 -> 10.0% (docs/validation.md#fp8-on-ada)."""

    mma_eta: float = 0.8
    tile_ns: float = 300.0
    sm89_tile_ns: float = 4000.0
    sm89_store_cost: float = 1.4
    sm89_store_cost_8warp: float = 3.2


WORK = dict.fromkeys(KERNELS, room_work("cutlass_fp8"))
