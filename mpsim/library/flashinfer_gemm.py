"""FlashInfer's GEMMs as vLLM runs them: `flashinfer_fp8_block_gemm` (fp8 1x128 / 128x128
block-scaled, vLLM's FlashInferFp8BlockScaledMMKernel below M = 32: the dynamic wrapper of
vllm/model_executor/kernels/linear/scaled_mm/flashinfer.py sends M < 32 to FlashInfer with A and B
swapped, M >= 32 to DeepGEMM, as aiconfigurator's collector/vllm/collect_gemm.py records) and
`flashinfer_nvfp4_gemm` (vLLM's FlashInferCuteDslNvFp4LinearKernel on Blackwell: e2m1 weights and
activations, e4m3 scales per 16 values, a CuTe-DSL tcgen05 block-scaled MMA). Work models:
mpsim/sim/gpu/library/flashinfer_gemm.py.

Tiles: the fp8 block kernel with swapped operands puts 128 weight rows (one scale block) on the
wgmma M side and the tokens, rounded up to 8, on its N side (at most 32 here), K steps of 128,
promoted on the CUDA cores per block (Hopper). The nvfp4 kernel's candidates are tcgen05 tiles of
128 token rows x {64, 128, 256} weight columns and 2-SM tiles of 256 x {128, 256} (a CTA pair, each
128 token rows, sharing the weight tile), K steps of 256 values (128
bytes of e2m1), persistent or stream-K; the simulator picks among them (ASSUMPTION: the CuTe-DSL
kernel's own tile table was not read).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import SCHED_PERSISTENT, scaled_config, scaled_row

FLASHINFER_FP8_BLOCK_GEMM = "flashinfer_fp8_block_gemm"
FLASHINFER_NVFP4_GEMM = "flashinfer_nvfp4_gemm"
KERNELS = (FLASHINFER_FP8_BLOCK_GEMM, FLASHINFER_NVFP4_GEMM)
SWAP_MAX_M = 32      # vLLM: FlashInfer below this M, DeepGEMM from it
# (tokens, weights, CTA pair): 1-SM tcgen05 tiles, and 2-SM tiles (two CTAs of 128 token rows
# sharing the weight tile)
NVFP4_TILES = ((128, 64, False), (128, 128, False), (128, 256, False), (128, 128, True),
               (128, 256, True))
NVFP4_BLOCK_K = 256


def fp8_block_config(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """Swap-AB: 128 weight rows x the tokens rounded up to 8 (<= 32), persistent, promoted."""
    tt = min(SWAP_MAX_M, cdiv(m, 8) * 8)
    return scaled_config(FLASHINFER_FP8_BLOCK_GEMM, m, n, tt, 128, 128, SCHED_PERSISTENT, sms,
                         swap_ab=True, promote=True)


def nvfp4_candidates(m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The tcgen05 tiles, persistent: FlashInfer's CuTe DSL block-scaled GEMM (vLLM's
    FlashInferCuteDslNvFp4LinearKernel) is CUTLASS's Sm100BlockScaledPersistentDenseGemmKernel,
    "persistent tile scheduling" (no stream-K); MMA tiler M 128 or 256 (a 2-SM pair), N 64..256."""
    return [scaled_config(FLASHINFER_NVFP4_GEMM, m, n, tt, wt, NVFP4_BLOCK_K, SCHED_PERSISTENT, sms,
                          warps=8, umma=True, pair=pair)
            for tt, wt, pair in NVFP4_TILES]


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS,
               generation: str = "hopper") -> list[LaunchConfig]:
    """The config of the library's fixed dispatch (Hopper and Blackwell only)."""
    if generation == "ampere":
        raise ValueError(f"{kernel}: FlashInfer's fp8 / fp4 GEMMs run on sm_90 / sm_100, not on "
                         "Ampere or Ada (sm_80 / sm_89)")
    if kernel == FLASHINFER_FP8_BLOCK_GEMM:
        return [fp8_block_config(m, n, k, sms)]
    return nvfp4_candidates(m, n, k, sms)


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A FlashInfer row: fp8-block (swap-AB, small M) or nvfp4 (128 x 128 tile by default)."""
    if kernel == FLASHINFER_FP8_BLOCK_GEMM:
        cfg = config or fp8_block_config(m, n, k, sms)
        return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8-block",))
    cfg = config or nvfp4_candidates(m, n, k, sms)[2]
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("nvfp4",))
