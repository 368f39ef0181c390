"""CUTLASS fp8 GEMMs as vLLM and SGLang run them: `cutlass_fp8_gemm` (W8A8 e4m3, per-tensor or
per-channel scales applied in the epilogue: vLLM CutlassFP8ScaledMMLinearKernel, SGLang sgl_kernel
fp8_scaled_mm) and `cutlass_fp8_block_gemm` (128x128 weight / 1x128 activation block scales: vLLM
CutlassFp8BlockScaledMMKernel, where DeepGEMM refuses the shape). Work models:
mpsim/sim/gpu/library/cutlass_fp8.py.

`cutlass_fp8_heuristic` is vLLM's sm90 dispatch, read from vllm-project/vllm
csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh (commit c30af866): M <= 16 swaps
A and B (the weights on the wgmma M side) with a 64 x 16 x 256 tile (weights x tokens x K); M in
(16, 64] swaps with 64 x 16 x 256 for N <= 1280, else 64 x 64 x 256 (these three use the
non-persistent warp-specialized kernel: one CTA per tile); M in (64, 128] a 64 x 128 x 128 tile
(tokens x weights), M >= 8192 with K >= 6144 256 x 128 x 128 (cooperative), else 128 x 128 x 128
(ping-pong), all persistent in clusters of 2 x 1 (two token tiles sharing each weight tile by TMA
multicast: `pair`). SGLang's sm90 fp8_scaled_mm dispatch is taken to be the same
(ASSUMPTION: its file was not read). The block-scaled kernel (scaled_mm_blockwise_sm90_fp8_dispatch
.cuh) runs a 128 x 128 x 128 persistent tile, promoting each 128-deep block's partial sums with
its scales on the CUDA cores as DeepGEMM does.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import SCHED_DP, SCHED_PERSISTENT, scaled_config, scaled_row

CUTLASS_FP8_GEMM = "cutlass_fp8_gemm"
CUTLASS_FP8_BLOCK_GEMM = "cutlass_fp8_block_gemm"
KERNELS = (CUTLASS_FP8_GEMM, CUTLASS_FP8_BLOCK_GEMM)
SMALL_N = 1280  # vLLM's sm90 dispatch: the N bound of its small-M tiles


def cutlass_fp8_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's sm90 fp8 dispatch (module docstring): (token tile, weight tile, K step, schedule)."""
    if m <= 16:
        return scaled_config(CUTLASS_FP8_GEMM, m, n, 16, 64, 256, SCHED_DP, sms, swap_ab=True)
    if m <= 64:
        tt = 16 if n <= SMALL_N else 64
        return scaled_config(CUTLASS_FP8_GEMM, m, n, tt, 64, 256, SCHED_DP, sms, swap_ab=True)
    if m <= 128:
        return scaled_config(CUTLASS_FP8_GEMM, m, n, 64, 128, 128, SCHED_PERSISTENT, sms, pair=True)
    if m >= 8192 and k >= 6144:
        return scaled_config(CUTLASS_FP8_GEMM, m, n, 256, 128, 128, SCHED_PERSISTENT, sms, pair=True)
    return scaled_config(CUTLASS_FP8_GEMM, m, n, 128, 128, 128, SCHED_PERSISTENT, sms, pair=True)


def cutlass_fp8_block_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's sm90 blockwise dispatch: one 128 x 128 x 128 persistent tile, CUDA-core promotion."""
    return scaled_config(CUTLASS_FP8_BLOCK_GEMM, m, n, 128, 128, 128, SCHED_PERSISTENT, sms,
                         promote=True)


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The config the library's fixed dispatch picks (no search: vLLM's heuristic is static)."""
    if kernel == CUTLASS_FP8_GEMM:
        return [cutlass_fp8_heuristic(m, n, k, sms)]
    return [cutlass_fp8_block_heuristic(m, n, k, sms)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A CUTLASS fp8 row: per-tensor/per-channel (`cutlass_fp8_gemm`) or 128x128 block scales."""
    cfg = config or candidates(kernel, m, n, k, sms)[0]
    formats = ("fp8",) if kernel == CUTLASS_FP8_GEMM else ("fp8-block",)
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, formats)
