"""Which kernel stands for a published fp8 / fp8_block / nvfp4 GEMM row, and how the row was timed
(the adapter's FP8/FP4 part: docs/validation.md "FP8 and FP4 GEMMs").

By (framework, kernel_source), read from aiconfigurator's collectors (collector/vllm, sglang,
trtllm collect_gemm.py at ai-dynamo/aiconfigurator 095f58a5) and the engines' dispatch:
- vLLM 0.24.0: CutlassFP8ScaledMMLinearKernel -> `cutlass_fp8_gemm` after vLLM's dynamic
  activation quantization (QUANT_TOKEN_VLLM); DeepGemmFp8BlockScaledMMKernel (M >= 32) ->
  `deepgemm_fp8_block_gemm`, FlashInferFp8BlockScaledMMKernel (M < 32) -> `flashinfer_fp8_block_gemm`,
  CutlassFp8BlockScaledMMKernel (shapes DeepGEMM refuses) -> `cutlass_fp8_block_gemm`, each after
  vLLM's per-token-group 1x128 quantization (QUANT_GROUP_VLLM; on Blackwell its DeepGEMM path's
  packed UE8M0 quantizer, another kernel, priced as QUANT_GROUP); FlashInferCuteDslNvFp4LinearKernel ->
  `flashinfer_nvfp4_gemm` after the fp4 quantization (QUANT_FP4). On Ada (sm_89) the CUTLASS fp8
  kernel is vLLM's c2x mma.sync dispatch (mpsim/library/cutlass_fp8.py) and TritonFp8BlockScaledMMKernel
  (L40S) -> `triton_fp8_block_gemm` after the same 1x128 quantizer (QUANT_GROUP_VLLM); Blackwell runs
  the Hopper designs' fp8 tiles (an assumption, as mpsim.sim.gpu.arch states for every kernel).
- SGLang 0.5.14: sglang_sgl_kernel_fp8_scaled_mm -> `cutlass_fp8_gemm` after sgl_per_token_quant_fp8
  (QUANT_TOKEN_SGL); sglang_deepgemm_gemm_nt_f8f8bf16 -> `deepgemm_fp8_block_gemm` (QUANT_GROUP).
- TensorRT-LLM 1.3.0rc20 `torch_flow` (mpsim/library/trtllm_fp8.py's rule): fp8 -> `trtllm_fp8_gemm`
  (QUANT_TENSOR_TRT; on Ada cuBLASLt's mma.sync kernels); fp8_block -> `trtllm_fp8_block_gemm`
  after fp8_quantize_1x128 (QUANT_GROUP_TRT; fp8_block_scaling_gemm by SM version: its sm_89
  blockwise kernel on Ada, its vendored DeepGEMM at that copy's heuristic on Hopper); the rows
  labelled `deepgemm` on Blackwell
  (DeepGEMM's fp8_swap_ab_gemm) -> `deepgemm_fp8_block_gemm` after TensorRT-LLM's Triton 1x128
  quantizer (QUANT_GROUP_TRITON); nvfp4 -> `trtllm_nvfp4_gemm`
  (QUANT_FP4).

Weight copies per measured call (the collectors', analysis/validation/weight_copies.py): vLLM 6
for fp8 and 1 for fp8_block and nvfp4; SGLang up to 6 (a memory budget these shapes never reach);
TensorRT-LLM 1.3 clamp(ceil(L2 bytes / weight bytes), 1, 5), before 1.3 5 for every shape. The
launch's config carries them (`w_copies`); what L2 finds between calls is the GPU model's replay
rule (mpsim/sim/gpu/memory.py `replay_hits`), as for cuBLAS's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpsim.analysis.validation.weight_copies import weight_copies as collector_copies
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.library.cutlass_fp8 import CUTLASS_FP8_BLOCK_GEMM, CUTLASS_FP8_GEMM
from mpsim.library.deepgemm import DEEPGEMM_FP8_BLOCK_GEMM
from mpsim.library.flashinfer_gemm import FLASHINFER_FP8_BLOCK_GEMM, FLASHINFER_NVFP4_GEMM
from mpsim.library.scaled_gemm import (
    QUANT_FP4,
    QUANT_GROUP,
    QUANT_GROUP_TRITON,
    QUANT_GROUP_TRT,
    QUANT_GROUP_VLLM,
    QUANT_TENSOR_TRT,
    QUANT_TOKEN_SGL,
    QUANT_TOKEN_VLLM,
)
from mpsim.library.triton_fp8 import TRITON_FP8_BLOCK_GEMM
from mpsim.library.trtllm_fp8 import TRTLLM_FP8_BLOCK_GEMM, TRTLLM_FP8_GEMM, TRTLLM_NVFP4_GEMM
from mpsim.sim.gpu.arch import generation

FLOAT_FORMATS = ("fp8", "fp8-block", "nvfp4", "mxfp4")
# (framework, kernel_source, w_format) -> (kernel, activation quantization of the call)
SCALED_KERNELS: dict[tuple[str, str, str], tuple[str, int]] = {
    ("vllm", "CutlassFP8ScaledMMLinearKernel", "fp8"): (CUTLASS_FP8_GEMM, QUANT_TOKEN_VLLM),
    ("vllm", "DeepGemmFp8BlockScaledMMKernel", "fp8-block"): (DEEPGEMM_FP8_BLOCK_GEMM, QUANT_GROUP_VLLM),
    ("vllm", "FlashInferFp8BlockScaledMMKernel", "fp8-block"): (FLASHINFER_FP8_BLOCK_GEMM, QUANT_GROUP_VLLM),
    ("vllm", "CutlassFp8BlockScaledMMKernel", "fp8-block"): (CUTLASS_FP8_BLOCK_GEMM, QUANT_GROUP_VLLM),
    ("vllm", "FlashInferCuteDslNvFp4LinearKernel", "nvfp4"): (FLASHINFER_NVFP4_GEMM, QUANT_FP4),
    ("sglang", "sglang_sgl_kernel_fp8_scaled_mm", "fp8"): (CUTLASS_FP8_GEMM, QUANT_TOKEN_SGL),
    ("sglang", "sglang_deepgemm_gemm_nt_f8f8bf16", "fp8-block"): (DEEPGEMM_FP8_BLOCK_GEMM, QUANT_GROUP),
    ("trtllm", "torch_flow", "fp8"): (TRTLLM_FP8_GEMM, QUANT_TENSOR_TRT),
    ("trtllm", "torch_flow", "fp8-block"): (TRTLLM_FP8_BLOCK_GEMM, QUANT_GROUP_TRT),
    ("trtllm", "deepgemm", "fp8-block"): (DEEPGEMM_FP8_BLOCK_GEMM, QUANT_GROUP_TRITON),
    ("trtllm", "torch_flow", "nvfp4"): (TRTLLM_NVFP4_GEMM, QUANT_FP4),
    ("vllm", "TritonFp8BlockScaledMMKernel", "fp8-block"): (TRITON_FP8_BLOCK_GEMM, QUANT_GROUP_VLLM),
}
SGLANG_COPIES = 6  # collector/sglang/collect_gemm.py: up to 6 quantize + GEMM pairs (its memory
#                   budget is never reached by these shapes)
COLLECTOR_DTYPE = {"fp8": "fp8", "fp8-block": "fp8_block", "nvfp4": "nvfp4", "mxfp4": "nvfp4"}


class NotModelledError(ValueError):
    """A well-formed fp8/fp4 row whose kernel or device the model has no launch for."""


def scaled_kernel(row: Mapping[str, Any], hw: HardwareSpec) -> tuple[str, int]:
    """(kernel, activation-quantization mode) standing for a measured fp8/fp4 GEMM row."""
    fmt = str(row["w_format"])
    framework = str(row.get("framework") or "").lower()
    source = str(row.get("kernel_source") or "")
    found = SCALED_KERNELS.get((framework, source, fmt))
    if found is None:
        raise NotModelledError(f"{fmt} GEMM kernel {source or 'unnamed'} ({framework or 'no framework'}) "
                               "is not modelled")
    need = "fp4" if fmt in ("nvfp4", "mxfp4") else "fp8"
    if not isinstance(hw, GpuSpec) or need not in hw.tensor_core.flops_per_clock_per_SM:
        raise NotModelledError(f"{hw.name} has no {need} tensor cores (its hardware file lists none)")
    if found[1] == QUANT_GROUP_VLLM and generation(hw) == "blackwell":
        # vLLM on SM100 quantizes for DeepGEMM's UE8M0 scales with another kernel
        # (per_token_group_quant_fp8_packed_for_deepgemm, _C.per_token_group_fp8_quant_packed: its
        # packed-register path), priced as the generic group quantizer
        return found[0], QUANT_GROUP
    return found  # a kernel the architecture does not run: its room refuses it (candidates)


def weight_copies(row: Mapping[str, Any], hw: GpuSpec) -> int:
    """How many weight copies the collector cycled through in one measured call: weight_copies.py's
    rule for the row's framework and version (TensorRT-LLM before 1.3: 5 for every shape), SGLang's
    fp8 collector SGLANG_COPIES (0: a collector whose rule is not known, no replay)."""
    fmt, framework = str(row["w_format"]), str(row.get("framework") or "").lower()
    if framework == "sglang":
        return SGLANG_COPIES
    return collector_copies(framework, str(row.get("fw_version") or ""), COLLECTOR_DTYPE[fmt],
                            int(row["m"]), int(row["n"]), int(row["k"]), hw.l2.size_MiB * 2**20,
                            hw.dram.size_GB * 1e9)
