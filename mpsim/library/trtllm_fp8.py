"""TensorRT-LLM's fp8 and nvfp4 GEMMs as its PyTorch flow runs them (aiconfigurator rows labelled
`torch_flow`): `trtllm_fp8_gemm` and `trtllm_nvfp4_gemm`. Work models:
mpsim/sim/gpu/library/trtllm_fp8.py.

The dispatch rule, read from TensorRT-LLM's tensorrt_llm/_torch/modules/linear.py (1.3.0rc20, as
aiconfigurator's collector/trtllm/collect_gemm.py drives it: `Linear` with QuantConfig FP8 /
FP8_BLOCK_SCALES / NVFP4, no input scale, so dynamic activation quantization):
- fp8 (FP8QDQLinearMethod): torch.ops.tensorrt_llm.quantize_e4m3_per_tensor (amax, quantize), then
  torch.ops.trtllm.cublas_scaled_mm: cuBLASLt's fp8 GEMM with the two per-tensor scales. Priced as
  `trtllm_fp8_gemm`: cuBLAS's Hopper tiles and schedules (mpsim/library/cublas.py), fp8 operands.
  On Ada (sm_89) cuBLASLt runs mma.sync e4m3 kernels: priced with CUTLASS's SM89 fp8 tiles
  (`SM89_FP8_TILES`) in cuBLAS's orientation (the weights on the MMA's M side), data-parallel,
  split into K slices where cuBLAS's Ada heuristic splits its bf16 GEMMs (cublas.sm80_splits:
  ASSUMPTION that its fp8 heuristic splits alike; cuBLASLt's own tile list is not public).
- fp8_block: fp8_quantize_1x128, then fp8_block_scaling_gemm, `trtllm_fp8_block_gemm`, a kernel by
  SM version (cpp/tensorrt_llm/kernels/cutlass_kernels/fp8_blockscale_gemm/fp8_blockscale_gemm.cu
  `fp8_gemm_run`). On Hopper (sm_90) `gemm_dispatch` runs the DeepGEMM kernel TensorRT-LLM vendors
  (cpp/include/tensorrt_llm/deep_gemm/, JIT-built per shape) at that copy's own heuristic
  (jit_utils.cuh `get_best_gemm_config`), not DeepGEMM's current one (`deepgemm_fp8_block_gemm`):
  BLOCK_M 64 when M <= 64 else 128 (no 256), BLOCK_N 16..128 in steps of 8, the fewest waves on the
  SMs, then the fullest last wave, then the larger BLOCK_M and the narrower BLOCK_N; the deepest of
  8..4 stages (6..4 when BLOCK_N does not divide 128) that fits 232,448 bytes of shared memory;
  persistent, tokens on wgmma's M side, every 128-deep partial sum promoted on the CUDA cores. Below
  M = 32 it runs the swap-AB kernel (`runGemmSwapAB`): the same rule with M and N exchanged, the
  weights tiled by BLOCK_M rows on the MMA's M side, the tokens by BLOCK_N (`fp8_block_sm90_config`).
  TMA multicast (M >= 1024) is left out as in the DeepGEMM room (ASSUMPTION: L2 traffic only).
  On Blackwell the collector labels the rows `deepgemm` (the DeepGEMM fp8_swap_ab_gemm path, the
  current DeepGEMM): `deepgemm_fp8_block_gemm`. On Ada (sm_89) the same op runs TensorRT-LLM's own
  blockwise kernel
  (cpp/tensorrt_llm/kernels/cutlass_kernels/fp8_blockscale_gemm/ada_blockwise_gemm/, dispatched by
  fp8_blockscale_gemm_kernel.cuh gemm_dispatch_sm89, read at 302f037f): one config, 32 tokens x 128
  weight rows x 128 of K, 3 stages, 4 warps in a 2 x 2 TiledMMA of mma.sync m16n8k32 e4m3
  (sm89_utils.cuh AdaBlockwiseGemmTraits), grid (ceil(M / 32), ceil(N / 128)), each K step's
  partial sums added to the accumulator times the tokens' x the block's scale (`promote`: one
  FFMA per element).
- nvfp4 (NVFP4LinearMethod): fp4_quantize of the activations, then torch.ops.trtllm.nvfp4_gemm:
  `trtllm_nvfp4_gemm`. The op asks its AutoTuner for a tactic; outside a tuning pass with nothing
  cached (the collector never tunes) that is tactic -1, and FP4GemmRunner.runGemm then runs
  fp4_bmm_impl's getDefaultGemmConfig (cpp/tensorrt_llm/thop/fp4Gemm.cpp): on sm_100
  CtaShape128x256x128B with a 1x1x1 cluster, i.e. 128 tokens (the activations are CUTLASS's A) x
  256 weight rows x 256 fp4 of K, one SM's MMA, persistent. One config at every shape
  (`nvfp4_default_config`); the B200 rows agree: at M <= 256 their time does not depend on M or,
  up to N = 16384 (64 tiles a token tile), on N, and grows linearly with K.

The end-to-end rows (E1, E2, E4: trtllm-bench on TensorRT-LLM v0.15) ran the TensorRT flow instead:
FP8Linear (tensorrt_llm/quantization/layers.py) quantizes its input with the checkpoint's static
per-tensor scale as a TensorRT Quantize layer fused into the producing kernel (the engine file's
`act_quant: fused`), and without `gemm_plugin fp8` TensorRT runs its own fp8 matmul tactic, timed at
build: priced as this room's `trtllm_fp8_gemm` at `fp8_heuristic`'s tile (an assumption, stated there).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv, next_pow2
from mpsim.library.cublas import (
    CUBLAS_MAX_ACC,
    CUBLAS_TOKEN_TILES,
    CUBLAS_WEIGHT_TILES,
    SMEM_PER_CTA_BY_ARCH,
    least_work,
    sm80_splits,
)
from mpsim.library.flashinfer_gemm import NVFP4_BLOCK_K
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import (
    SCHED_DP,
    SCHED_PERSISTENT,
    SCHED_STREAM_K,
    scaled_config,
    scaled_row,
    sm89_config,
    wave_fill,
)

TRTLLM_FP8_GEMM = "trtllm_fp8_gemm"
TRTLLM_NVFP4_GEMM = "trtllm_nvfp4_gemm"
# getDefaultGemmConfig on sm_100: CtaShape128x256x128B (tokens, weight rows; K 128 bytes of fp4)
NVFP4_DEFAULT_TILE = (128, 256)
TRTLLM_FP8_BLOCK_GEMM = "trtllm_fp8_block_gemm"  # fp8_block_scaling_gemm by SM version (docstring)
# TensorRT-LLM's vendored DeepGEMM on sm_90 (jit_utils.cuh): BLOCK_N candidates, stage counts, the
# shared memory it fits them in, and the M below which gemm_dispatch swaps A and B
SM90_BLOCK_NS = tuple(range(16, 129, 8))
SM90_SMEM = 232448
SM90_SWAP_BELOW = 32
KERNELS = (TRTLLM_FP8_GEMM, TRTLLM_NVFP4_GEMM, TRTLLM_FP8_BLOCK_GEMM)
# AdaBlockwiseGemmTraits as gemm_dispatch_sm89 instantiates it: (tokens, weight rows, K, stages),
# warps (along the tokens, the weights, K)
SM89_BLOCK_TILE = (32, 128, 128, 3)
SM89_BLOCK_WARPS = (2, 2, 1)
FP8_BLOCK_K = 128  # cuBLASLt fp8 wgmma kernels: K steps of 128 bytes
# CUTLASS's SM89 e4m3 tensor-op tiles (NVIDIA/cutlass python/cutlass_library/generator.py at
# 7107b0553, GenerateSM89_TensorOp_16832_fp8): (weight tile, token tile, K tile, warps along the
# weights, along the tokens), each at the deepest of its generated stage counts that fits the CTA's
# shared memory (SM89_FP8_STAGES)
SM89_FP8_TILES = (
    (256, 128, 64, 4, 2), (256, 128, 128, 4, 2), (128, 256, 128, 2, 4), (128, 256, 64, 2, 4),
    (256, 64, 128, 4, 1), (256, 64, 64, 4, 1), (64, 256, 128, 1, 4), (64, 256, 64, 1, 4),
    (256, 32, 128, 4, 1), (256, 32, 64, 4, 1), (32, 256, 128, 1, 4), (32, 256, 64, 1, 4),
    (128, 128, 128, 2, 2), (128, 128, 64, 2, 2), (128, 64, 128, 2, 2), (64, 128, 128, 2, 2),
    (128, 64, 64, 2, 2), (64, 128, 64, 2, 2), (128, 32, 128, 4, 1), (128, 32, 64, 4, 1),
    (32, 128, 128, 1, 4), (32, 128, 64, 1, 4), (64, 64, 128, 2, 2), (64, 64, 64, 2, 2),
)
SM89_FP8_STAGES = (10, 6, 5, 4, 3)  # the generator's stage counts, deepest first


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


def fp8_sm89_candidates(m: int, n: int, k: int, sms: int = GPU_SMS,
                        smem_per_cta: int = SMEM_PER_CTA_BY_ARCH["ada"]) -> list[LaunchConfig]:
    """cuBLASLt's fp8 GEMM on Ada (module docstring): every SM89 tile at its deepest pipeline that
    fits `smem_per_cta`, at each split-K cuBLAS's Ada heuristic allows."""
    out = []
    for wt, tt, bk, warps_w, warps_t in SM89_FP8_TILES:
        stages = next((s for s in SM89_FP8_STAGES if (wt + tt) * bk * s <= smem_per_cta), 0)
        if stages < 3:
            continue
        tiles = cdiv(m, tt) * cdiv(n, wt)
        for split in sm80_splits(m, n, k, tiles, cdiv(k, bk), sms):
            out.append(sm89_config(TRTLLM_FP8_GEMM, m, n, tt, wt, bk, stages, (warps_t, warps_w, 1),
                                   swap_ab=True, split_k=split))
    return out


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS,
               generation: str = "hopper") -> list[LaunchConfig]:
    """The tiles a search tries on a GPU `generation` (`ampere` is Ada here: fp8 needs sm_89)."""
    if kernel == TRTLLM_FP8_BLOCK_GEMM:
        if generation == "ampere":
            return [fp8_block_sm89_config(m, n)]
        if generation == "hopper":
            return [fp8_block_sm90_config(m, n, k, sms)]
        raise ValueError(f"{kernel}: TensorRT-LLM's sm_89 / sm_90 fp8_block_scaling_gemm; on {generation} "
                         "it runs DeepGEMM's fp8_swap_ab_gemm (deepgemm_fp8_block_gemm)")
    if generation == "ampere":
        if kernel != TRTLLM_FP8_GEMM:
            raise ValueError(f"{kernel}: NVFP4 needs Blackwell's tensor cores, not sm_89's")
        return fp8_sm89_candidates(m, n, k, sms)
    if kernel == TRTLLM_FP8_GEMM:
        return fp8_candidates(m, n, k, sms)
    return [nvfp4_default_config(m, n, sms)]


def nvfp4_default_config(m: int, n: int, sms: int = GPU_SMS) -> LaunchConfig:
    """TensorRT-LLM's untuned nvfp4 tactic on sm_100 (module docstring): 128 tokens x 256 weight
    rows x 256 of K, 1-SM tcgen05 MMA, persistent."""
    tt, wt = NVFP4_DEFAULT_TILE
    return scaled_config(TRTLLM_NVFP4_GEMM, m, n, tt, wt, NVFP4_BLOCK_K, SCHED_PERSISTENT, sms,
                         warps=8, umma=True)


def fp8_heuristic(m: int, n: int, sms: int = GPU_SMS) -> LaunchConfig:
    """The fixed choice an engine run takes (no autotune): cuBLAS's Hopper rule
    (mpsim/library/cublas.py `cublas_heuristic`, the one the bf16 GEMMs of the same engine file take):
    the token tile the next power of two of M within 16..128, 256 weight rows, stream-K; swapped
    operands (the weights on the MMA's M side). ASSUMPTION for TensorRT-LLM v0.15's TensorRT flow
    (E1/E2/E4): FP8Linear without `gemm_plugin fp8` (PluginConfig's default gemm_plugin is None)
    hands TensorRT a Q/DQ matmul whose fp8 tactic TensorRT times at build, per optimization profile
    (tensorrt_llm/quantization/layers.py FP8Linear.forward); its tactic list is not public, so the
    tile follows M as cuBLAS's does. A fixed 128-token tile at M = 1 moved 128 activation rows per
    K step and left the grid on 16-112 SMs (1.1-1.8 TB/s on llama-3-8b's decode shapes, H200)."""
    tt = min(128, max(16, next_pow2(m)))
    return scaled_config(TRTLLM_FP8_GEMM, m, n, tt, 256, FP8_BLOCK_K, SCHED_STREAM_K, sms, swap_ab=True)


def fp8_block_sm89_config(m: int, n: int) -> LaunchConfig:
    """TensorRT-LLM's Ada blockwise kernel: its one config (module docstring)."""
    tt, wt, bk, stages = SM89_BLOCK_TILE
    return sm89_config(TRTLLM_FP8_BLOCK_GEMM, m, n, tt, wt, bk, stages, SM89_BLOCK_WARPS, swap_ab=False,
                       promote=True)


def _sm90_smem(stages: int, k: int, rows_a: int, rows_b: int, swap: bool) -> int:
    """Shared memory of a vendored-DeepGEMM layout (jit_utils.cuh `get_smem_size`): the output tile,
    per stage both operands' K step and the token scales, the weight scales of all K once."""
    k_scales = cdiv(k, FP8_BLOCK_K) * 4
    if swap:  # rows_a weight rows, rows_b tokens
        per_stage = (rows_a + rows_b) * FP8_BLOCK_K + cdiv(rows_b * 4, 128) * 128
        return rows_a * rows_b * 2 + stages * per_stage + cdiv(k_scales, 8) * 8 + stages * 16
    per_stage = (rows_a + rows_b) * FP8_BLOCK_K + rows_a * 4
    uniform = 1 if FP8_BLOCK_K % rows_b == 0 else 2
    return rows_a * rows_b * 2 + stages * per_stage + cdiv(k_scales * uniform, 8) * 8 + stages * 16


def sm90_block_layout(rows: int, cols: int, k: int, sms: int, swap: bool) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, stages) of the vendored DeepGEMM heuristic for an M = `rows` x N = `cols`
    problem (module docstring; with `swap` rows are the weight's N and cols the tokens)."""
    block_m = 64 if rows <= 64 else 128
    best, best_key = SM90_BLOCK_NS[0], (0, 0, 0)
    for block_n in SM90_BLOCK_NS:
        waves, last = wave_fill(cdiv(rows, block_m) * cdiv(cols, block_n), sms)
        key = (-waves, last, -block_n)  # fewest waves, fullest last wave, narrowest
        if key > best_key or block_n == SM90_BLOCK_NS[0]:
            best, best_key = block_n, key
    choices = (8, 7, 6, 5, 4) if FP8_BLOCK_K % best == 0 else (6, 5, 4)
    stages = next((s for s in choices if _sm90_smem(s, k, block_m, best, swap) <= SM90_SMEM), 0)
    if not stages:
        raise ValueError(f"{TRTLLM_FP8_BLOCK_GEMM}: no pipeline fits m x n = {rows} x {cols}, k = {k}")
    return block_m, best, stages


def fp8_block_sm90_config(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """fp8_block_scaling_gemm on Hopper (module docstring): the vendored DeepGEMM's layout, swap-AB
    below M = 32 (the weights on wgmma's M side, the tokens on its N side)."""
    if m < SM90_SWAP_BELOW:
        weight_tile, token_tile, stages = sm90_block_layout(n, m, k, sms, swap=True)
        return scaled_config(TRTLLM_FP8_BLOCK_GEMM, m, n, token_tile, weight_tile, FP8_BLOCK_K,
                             SCHED_PERSISTENT, sms, swap_ab=True, promote=True,
                             warps=4 + (4 if weight_tile <= 64 else 8), stages=stages)
    token_tile, weight_tile, stages = sm90_block_layout(m, n, k, sms, swap=False)
    warps = 4 + (4 if token_tile <= 64 else 8)
    return scaled_config(TRTLLM_FP8_BLOCK_GEMM, m, n, token_tile, weight_tile, FP8_BLOCK_K,
                         SCHED_PERSISTENT, sms, promote=True, warps=warps, stages=stages)


def fp8_sm89_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """The fixed choice on Ada: the SM89 tile x split-K whose busiest SM does the least MMA work
    (cublas.least_work, the rule cuBLAS's bf16 heuristic is priced with there)."""
    return least_work(fp8_sm89_candidates(m, n, k, sms), k, sms)


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A TensorRT-LLM fp8 (per-tensor), Ada fp8-block or nvfp4 row; default config: `fp8_heuristic`,
    the Ada kernel's one config / `nvfp4_default_config`."""
    if kernel == TRTLLM_FP8_GEMM:
        cfg = config or fp8_heuristic(m, n, sms)
        return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8",))
    if kernel == TRTLLM_FP8_BLOCK_GEMM:
        cfg = config or fp8_block_sm89_config(m, n)  # on a GPU: by architecture (library.ARCH_CONFIGS)
        return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("fp8-block",))
    cfg = config or nvfp4_default_config(m, n, sms)
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, ("nvfp4",))
