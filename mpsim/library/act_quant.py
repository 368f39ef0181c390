"""Activation quantization before a W8A8 or A4 GEMM (issue 26): the row-wise kernels the engines
launch to turn a GEMM's 16-bit input into fp8 e4m3 (per token, or per 1x128 group for block-scaled
GEMMs) or nvfp4 (e2m1 with an e4m3 scale per 16): kernel names, launch configs and the row builder
(`framework_op_row(FP8_ACT_QUANT, ...)`); mpsim/sim/gpu/library/act_quant.py prices them.

A row: op `other`, m tokens, n = the GEMM's K (the row width quantized); bytes by
traces/accounting.py (_act_quant). Launch configs, from the engines' source:
- fp8_act_quant: vLLM csrc/quantization/fp8/common.cu dynamic_per_token_scaled_fp8_quant: one block
  per token of min(K, 256) threads; a block reduces its row's absmax (cub::BlockReduce), then
  converts the row (two passes, 16-byte vector loads). TensorRT-LLM's per-tensor quantize op
  (static_quantize_e4m3_per_tensor) and SGLang's sgl_per_token_quant_fp8 are the same row walk.
- fp8_block_act_quant: sgl-kernel csrc/gemm/per_token_group_quant_8bit.cu (vLLM's
  per_token_group_quant_fp8 CUDA path is the same kernel): 16 threads per 128-wide group, 16, 8, 4,
  2 or 1 groups per block (the largest dividing the group count), one block per that many groups.
- nvfp4_act_quant: vLLM csrc/quantization/fp4/nvfp4_quant_kernels.cu scaled_fp4_quant: 8 values
  per thread, min(K / 8, 512) threads a block, min(M, SMs x 2048 / threads) blocks walking the rows.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import Row, apply_config

FP8_ACT_QUANT = "fp8_act_quant"
FP8_BLOCK_ACT_QUANT = "fp8_block_act_quant"
NVFP4_ACT_QUANT = "nvfp4_act_quant"
KERNELS = (FP8_ACT_QUANT, FP8_BLOCK_ACT_QUANT, NVFP4_ACT_QUANT)
OPS = dict.fromkeys(KERNELS, "other")
# The activation dtype each kernel produces (the GEMM row's a_dtype)
A_DTYPE = {FP8_ACT_QUANT: "fp8-e4m3", FP8_BLOCK_ACT_QUANT: "fp8-e4m3", NVFP4_ACT_QUANT: "fp4-e2m1"}

PER_TOKEN_THREADS = 256      # common.cu: block_size
GROUP = 128                  # 1x128 activation groups (DeepSeek-V3 / DeepGEMM)
THREADS_PER_GROUP = 16       # per_token_group_quant_8bit.cu: THREADS_PER_GROUP
FP4_ELTS_PER_THREAD = 8      # nvfp4_quant_kernels.cu: ELTS_PER_THREAD
FP4_MAX_THREADS = 512
SM_THREADS = 2048            # nvfp4_quant_kernels.cu: numBlocksPerSM = 2048 / block.x


def act_quant_config(kernel: str, tokens: int, width: int, sms: int = GPU_SMS) -> LaunchConfig:
    """The launch config of `kernel` quantizing `tokens` rows of `width` values."""
    if kernel == FP8_ACT_QUANT:
        threads, grid = min(width, PER_TOKEN_THREADS), tokens
    elif kernel == FP8_BLOCK_ACT_QUANT:
        if width % GROUP:
            raise MpsimInputError(f"{kernel}: K = {width} is not a multiple of the {GROUP}-wide group")
        groups = tokens * width // GROUP
        per_block = next(g for g in (16, 8, 4, 2, 1) if groups % g == 0)
        threads, grid = per_block * THREADS_PER_GROUP, groups // per_block
    elif kernel == NVFP4_ACT_QUANT:
        if width % 16:
            raise MpsimInputError(f"{kernel}: K = {width} is not a multiple of the 16-value scale block")
        threads = min(width // FP4_ELTS_PER_THREAD, FP4_MAX_THREADS)
        grid = min(tokens, sms * (SM_THREADS // threads))
    else:
        raise ValueError(f"not an activation-quantization kernel: {kernel!r}; expected one of "
                         f"{list(KERNELS)}")
    return LaunchConfig(kernel, (grid,), None, threads, None, cdiv(threads, 32), 1)


def rowwise_row(kernel: str, tokens: int, hidden: int, *, heads: int = 0, kv_heads: int = 0,
                head_dim: int = 0, sms: int = GPU_SMS) -> Row:
    """`tokens` rows of a GEMM's `hidden` (= K) wide input quantized by `kernel`."""
    row: Row = {"op": "other", "module": kernel, "m": tokens, "n": hidden, "k": None}
    return apply_config(row, act_quant_config(kernel, tokens, hidden, sms))
