"""vLLM's Triton W8A8 block-scaled fp8 GEMM (`triton_fp8_block_gemm`): w8a8_triton_block_scaled_mm in
vllm/model_executor/layers/quantization/utils/fp8_utils.py (read at 007d5005), the path vLLM's
W8A8BlockFp8LinearOp takes on sm_89 (L40S: aiconfigurator's TritonFp8BlockScaledMMKernel rows),
where neither DeepGEMM nor CUTLASS's blockwise kernel runs. Work model:
mpsim/sim/gpu/library/triton_fp8.py.

The kernel: one program per BLOCK_SIZE_M x BLOCK_SIZE_N output tile (tokens x weight rows, a grouped
raster of GROUP_SIZE_M 32), a K loop of BLOCK_SIZE_K = 128 steps, each `tl.dot` on the fp8 tiles
(mma.sync m16n8k32 on sm_89) followed by `accumulator += dot * a_s[:, None] * b_s[None, :]` on the
CUDA cores (the tokens' 1x128 scales and the weight block's 128x128 scale): a promotion per K step,
as DeepGEMM's. Its config is the tuned JSON vLLM ships for (N, K, device) where there is one, else
the default {BLOCK_SIZE_M 64, BLOCK_SIZE_N 128, BLOCK_SIZE_K 128, GROUP_SIZE_M 32, num_warps 4,
num_stages 2} (`DEFAULT`). vLLM ships L40S files for a few shapes (N=10240,K=5120 and
N=17408,K=5120 among them); they are not read here, so those shapes are priced at the default too
(an assumption). Warps over the tile follow Triton's warpsPerTileV2 (AccelerateMatmul.cpp): 2 x 2
for 64 x 128.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import scaled_row, sm89_config

TRITON_FP8_BLOCK_GEMM = "triton_fp8_block_gemm"
KERNELS = (TRITON_FP8_BLOCK_GEMM,)
# BLOCK_SIZE_M (tokens), BLOCK_SIZE_N (weight rows), BLOCK_SIZE_K, num_stages, num_warps
DEFAULT = (64, 128, 128, 2, 4)


def warps_per_tile(rows: int, cols: int, warps: int) -> tuple[int, int]:
    """Triton's warpsPerTileV2 for an mma.sync (v2) dot of rows x cols: a warp covers 16 x 8; the
    next warp doubles the rows while rows/16/w0 >= cols/16/w1 (and rows allow it), else the cols."""
    w = [1, 1]
    while w[0] * w[1] < warps:
        if rows // 16 // w[0] >= cols // 16 // w[1] and w[0] < rows // 16:
            w[0] *= 2
        else:
            w[1] *= 2
    return w[0], w[1]


def default_config(m: int, n: int, k: int) -> LaunchConfig:
    """vLLM's default config (no tuned JSON) on sm_89."""
    bm, bn, bk, stages, warps = DEFAULT
    along_m, along_n = warps_per_tile(bm, bn, warps)
    return sm89_config(TRITON_FP8_BLOCK_GEMM, m, n, bm, bn, bk, stages, (along_m, along_n, 1),
                       swap_ab=False, promote=True)


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS,
               generation: str = "hopper") -> list[LaunchConfig]:
    """The default config; modelled on Ada (`ampere` generation) only: vLLM takes DeepGEMM or
    CUTLASS's blockwise kernel on Hopper and Blackwell."""
    if generation != "ampere":
        raise ValueError(f"{kernel}: modelled on sm_89 only (vLLM runs DeepGEMM / CUTLASS's blockwise "
                         f"kernel on {generation})")
    return [default_config(m, n, k)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A Triton fp8 block-scaled row (fp8-block weights, fp8 1x128 activations), the default config
    by default."""
    cfg = config or default_config(m, n, k)
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8-block",))
