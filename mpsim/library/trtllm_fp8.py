"""TensorRT-LLM's fp8 and nvfp4 GEMMs as its PyTorch flow runs them (aiconfigurator rows labelled
`torch_flow`): `trtllm_fp8_gemm` and `trtllm_nvfp4_gemm`. Work models:
mpsim/sim/gpu/library/trtllm_fp8.py.

The dispatch rule, read from TensorRT-LLM's tensorrt_llm/_torch/modules/linear.py (1.3.0rc20, as
aiconfigurator's collector/trtllm/collect_gemm.py drives it: `Linear` with QuantConfig FP8 /
FP8_BLOCK_SCALES / NVFP4, no input scale, so dynamic activation quantization):
- fp8 (FP8QDQLinearMethod): torch.ops.tensorrt_llm.quantize_e4m3_per_tensor (amax, quantize), then
  torch.ops.trtllm.cublas_scaled_mm: cuBLASLt's fp8 GEMM with the two per-tensor scales. Priced as
  `trtllm_fp8_gemm`: cuBLAS's Hopper tiles and schedules (mpsim/library/cublas.py), fp8 operands.
- fp8_block on Hopper: fp8_quantize_1x128, then fp8_block_scaling_gemm (TensorRT-LLM's port of
  DeepGEMM's design): priced as `deepgemm_fp8_block_gemm`; on Blackwell the collector labels the
  rows `deepgemm` (the DeepGEMM fp8_swap_ab_gemm path): the same kernel name.
- nvfp4 (NVFP4LinearMethod): fp4_quantize of the activations, then nvfp4_gemm (CUTLASS sm100
  block-scaled tiles; the autotuner's tactics): `trtllm_nvfp4_gemm`, candidates FlashInfer's
  tcgen05 tiles, persistent only (ASSUMPTION: the tactic list was not read; the published rows'
  time grows with K at small M as a kernel that does not split K).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.cublas import CUBLAS_MAX_ACC, CUBLAS_TOKEN_TILES, CUBLAS_WEIGHT_TILES
from mpsim.library.flashinfer_gemm import nvfp4_candidates
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import SCHED_DP, SCHED_PERSISTENT, SCHED_STREAM_K, scaled_config, scaled_row

TRTLLM_FP8_GEMM = "trtllm_fp8_gemm"
TRTLLM_NVFP4_GEMM = "trtllm_nvfp4_gemm"
KERNELS = (TRTLLM_FP8_GEMM, TRTLLM_NVFP4_GEMM)
FP8_BLOCK_K = 128  # cuBLASLt fp8 wgmma kernels: K steps of 128 bytes


def fp8_candidates(m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    """cuBLAS's token x weight tiles, data-parallel or stream-K, fp8 K steps of 128."""
    out = []
    for tt in CUBLAS_TOKEN_TILES:
        for wt in CUBLAS_WEIGHT_TILES:
            if tt * wt <= CUBLAS_MAX_ACC:
                for sched in (SCHED_DP, SCHED_STREAM_K):
                    out.append(scaled_config(TRTLLM_FP8_GEMM, m, n, tt, wt, FP8_BLOCK_K, sched, sms,
                                             swap_ab=True))
    return out


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    if kernel == TRTLLM_FP8_GEMM:
        return fp8_candidates(m, n, k, sms)
    return nvfp4_candidates(m, n, k, sms, TRTLLM_NVFP4_GEMM, (SCHED_PERSISTENT,))


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A TensorRT-LLM fp8 (per-tensor) or nvfp4 row; default config: stream-K 128 x 256 / 128 x 128."""
    if kernel == TRTLLM_FP8_GEMM:
        cfg = config or scaled_config(kernel, m, n, 128, 256, FP8_BLOCK_K, SCHED_STREAM_K, sms,
                                      swap_ab=True)
        return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8",))
    cfg = config or nvfp4_candidates(m, n, k, sms, TRTLLM_NVFP4_GEMM, (SCHED_PERSISTENT,))[1]
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("nvfp4",))
