"""TensorRT-LLM's CUTLASS fpA_intB GEMM on Hopper (`trtllm_fpaintb_gemm` rows) as CTA work.

Source: NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/cutlass_kernels/fpA_intB_gemm/
(fpA_intB_gemm_template_sm90.h, launchers/fpA_intB_launcher_sm90.inl) and
plugins/weightOnlyQuantMatmulPlugin (M < 5 runs the batched GEMV, trtllm_work.py; M >= 5 this GEMM
with the tactic the plugin profiler timed fastest). The launcher swaps A and B so the int4/int8
weights are the wgmma A operand: TMA brings them to shared memory, the consumer warpgroups load
them to registers, convert (CUTLASS NumericArrayConverter: int4 -> fp16 by shift + 4 lop3 + 2 hsub2
+ 2 hfma2 per 8 weights, int8 by 2 prmt + 2 hsub2 per 4) and multiply by the per-channel scale
(one hmul2 per 2 weights), then issue a register-sourced wgmma against the activations in shared
memory. 64-row tiles: ping-pong (one consumer warpgroup per tile), persistent scheduler;
128-row tiles: cooperative (two warpgroups), stream-K scheduler. Instruction counts per weight
come from the converter's source; the three latency constants are fitted (docs/kernels-weight-
only.md names the rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.wo_tiled import WoKernel, wo_tiled_work
from mpsim.sim.gpu.work import LaunchWork
from mpsim.sim.params import SimParams

FPAINTB = WoKernel(
    name="trtllm fpA_intB",
    alu_per_w4=5 / 8,      # 1 shift + 4 lop3 per 8 int4 (numeric_conversion.h, int4b_t -> half_t)
    fma_per_w4=8 / 16,     # 2 hsub2 + 2 hfma2 + 4 hmul2 (scale) per 8 weights, 2 weights a lane-op
    alu_per_w8=2 / 4,      # 2 prmt per 4 int8 (int8_t -> half_t magic-number path)
    fma_per_w8=4 / 8,      # 2 hsub2 + 2 hmul2 (scale) per 4 weights
    lds_per_word=1.0,      # one 32-bit shared-memory load per packed word (A fragment to registers)
    cpi=8.5,               # fitted (fit rows: docs/kernels-weight-only.md)
    mma_wait_cycles=118.0,  # fitted
    mma_token_cycles=2.0,  # fitted
    tile_ns=2500.0,        # fitted: per output tile (prologue fill, epilogue), not hidden
    fixup_ns=1121.0,       # stream-K fix-up: cuBLAS's (SimParams.cublas_sk_fixup_us), same CUTLASS path
    fixed_ns=3000.0,       # fitted: per layer beyond the kernel floor (profiled plugin enqueue)
)

# Before Hopper (cutlass_kernels/fpA_intB_gemm/fpA_intB_gemm_template.h, Sm80/Sm89 arch tags): CUTLASS
# 2 multistage mma.sync kernels of four warps, every warp converting its B fragments (the
# interleaved layout, the same magic-number converters), serial split-K. ASSUMPTION: the Hopper
# kernel's fitted latency constants (no Ampere/Ada rows were fitted).
FPAINTB_SM80 = replace(FPAINTB, name="trtllm fpA_intB sm80", convert_threads_per_64=0)


def fpaintb_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> LaunchWork:
    return wo_tiled_work(row, cfg, r, FPAINTB_SM80 if cfg.get("sm80") else FPAINTB, resident)
