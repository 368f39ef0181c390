"""What the FP8/FP4 GEMM rooms share on the synthesis floor (cutlass_fp8.py, deepgemm.py,
flashinfer_gemm.py, trtllm_fp8.py): the config keys of a scaled low-precision tensor-core GEMM, the
activation-quantization modes a measured call may include, and the row builder.

A config: block_m = the token tile (tokens of y = x W^T), block_n = the weight tile (output
features), block_k = the K step of one pipeline stage; extras `sched` (0 data-parallel grid of
tiles, 1 persistent: min(tiles, SMs) CTAs walking the tiles, 2 stream-K: CUTLASS's heuristic,
mpsim/sim/gpu/library/wo_tiled.py `_stream_k`), `swap_ab` (1: the weights on the MMA's M side, the
tokens on its N side, as CUTLASS/FlashInfer run small M), `mma_m` (the MMA's smallest row count on
the token side: 64 for Hopper wgmma with tokens on M, 8 with swap_ab), `promote` (1: DeepGEMM's
promotion of each 128-deep fp8 partial sum into fp32 registers on the CUDA cores, Hopper), `quant`
(the activation quantization the call runs before the GEMM, below) and, for a measured call,
`w_copies` (how many copies of the weight the benchmark cycled: what L2 finds between calls is the
GPU model's `replay_hits`, as for cuBLAS's rows; absent for a model's forward pass).

Activation quantization (`quant`): a trace's GEMM row takes quantized activations from the
policy's own quantization launch (fp8pol's `fp8_act_quant` / `fp8_block_act_quant` /
`nvfp4_act_quant`), so synthesis builds rows with QUANT_NONE. A published measurement of a
framework's linear layer includes its quantization; the validation adapter sets the mode that
framework runs and the GEMM row then stands for those kernels too (QUANT_KERNELS, what the
protocol's per-launch cost counts; QUANT_ROWS_PER_SM, the token rows one SM quantizes at a time, or
for vLLM's and TensorRT-LLM's group kernels, which spread groups rather than rows, the CTAs / warps
one SM holds; QUANT_GROUP_MODES, the 1x128 modes):
- QUANT_TOKEN_VLLM: vLLM's dynamic activation quantization of its CUTLASS fp8 path, one kernel
  launching one 256-thread CTA per token row (vllm-project/vllm csrc/quantization/w8a8/fp8/
  common.cu `dynamic_per_token_scaled_fp8_quant`: block min(hidden, 256), 16-byte vectors, so
  QUANT_VLLM_PASS_VALUES values a pass, an absmax pass then a quantize pass; 8 rows per SM by
  threads). The published rows show one kernel: N = K = 128, M = 1 costs 1.9 us (one launch gap
  and kernel floor) more than bf16; time grows by 7.1 ns per token row up to K = 2048 and in steps
  at every further 2048 of K (H200 vLLM 0.24.0 fp8 rows at N = 128, M 16384: 7.2 / 10.4 / 14.0 /
  18.0 ns a row at K 2048 / 4096 / 6144 / 8192, 32 at 16384), as such a latency-bound kernel does.
- QUANT_TOKEN_SGL: SGLang's sgl_per_token_quant_fp8 (sgl-project/sglang sgl-kernel/csrc/gemm/
  per_token_quant_fp8.cu at 0490047f), one kernel of two forms by the token count: below SMs x 2 x 8 tokens
  (QUANT_SGL_WARP_FROM per SM) `per_token_quant_fp8_small_batch_kernel`, one 256-thread CTA a token
  as vLLM's (8 rows an SM by threads), 16 values a thread a pass (QUANT_SGL_PASS_VALUES, 4096);
  from there `per_token_quant_fp8_kernel`, one warp a token, 8 warps a CTA (QUANT_SGL_WARP_ROWS_PER_SM
  64 an SM), 16 values a lane a pass (QUANT_SGL_WARP_PASS_VALUES, 512). Both take an absmax pass
  and a quantize pass, each reading the row from global memory (the warp kernel's shared-memory
  copy is off for every row: its launcher compares the buffer's bytes with 48, a KB figure), so the
  warp kernel's second read finds its row in L2 only while the rows in flight fit there.
- QUANT_TENSOR_TRT: TensorRT-LLM's quantize_e4m3_per_tensor (an amax reduction, the quantize): 2
  kernels, neither by rows (cpp/tensorrt_llm/common/cudaFp8Utils.cu at 106ff7ce,
  invokeComputeScalesAndQuantizeMatrix's PER_TENSOR branch): computeFP8QuantizeScale on a fixed
  grid of 1024 CTAs of 1024 threads, each a grid-stride max over all the elements, a block
  reduction and one atomicMax (QUANT_TRT_AMAX_GRID, QUANT_TRT_AMAX_THREADS), then
  invokeQuantizeMatrix's scaleMatrixPerTensorVec, 256-thread CTAs of 8 values a thread a pass
  (QUANT_TRT_ELEMENTS), up to 65,536 CTAs, grid-stride beyond.
- QUANT_GROUP: per-token-group 1x128 e4m3 (vLLM per_token_group_quant_fp8, SGLang
  sglang_per_token_group_quant_fp8, TensorRT-LLM fp8_quantize_1x128): 1 kernel, a warp (or half
  of one) per 128-value group, 32 rows per SM (ASSUMPTION).
- QUANT_GROUP_TRITON: TensorRT-LLM's Triton 1x128 quantizer on Blackwell (fp8_utils.py
  `per_token_quant_and_transform`, before DeepGEMM's fp8_swap_ab_gemm): grid (ceil(K / 512), 64),
  one warp a program, each walking the tokens t, t + 64, ... and, per token, its four 128-value
  groups in turn (UE8M0 scales packed four to an int32): a round is four group rounds
  (QUANT_GROUPS_IN_TURN), the programs along K run side by side (no K factor on the round), and the
  token loop's 6-deep pipeline (NUM_STAGES) keeps later tokens' loads in flight, so rounds repeat
  per 32 rows an SM as the CUDA quantizers' do (ASSUMPTION).
- QUANT_GROUP_VLLM: vLLM's own 1x128 quantizer (vllm-project/vllm csrc/quantization/w8a8/fp8/
  per_token_group_quant.cu `per_token_group_quant_8bit`): groups spread over 256-thread CTAs, 16
  threads a group and 16 groups a CTA (QUANT_VLLM_GROUPS_PER_CTA; its register path, where the
  source has one, takes 32 groups of 8 threads: the fitted round absorbs which ran), 8 CTAs an SM
  by threads; a round is SMs x 8 CTAs of groups, whatever the rows (the fp8_block rows' cost
  over bf16 at N = 128 grows with M x K, 542 us at M = K = 16384 on H200, where SGLang's quantizer
  takes 128).
- QUANT_GROUP_TRT: TensorRT-LLM's fp8_quantize_1x128 (cpp/tensorrt_llm/kernels/
  fp8_blockscale_gemm `fp8_1x128_cs`, `scale_1x128_kernel`; sgl-kernel carries a copy): a fixed grid
  of SMs x 8 CTAs of 256 threads (a full SM by threads), one warp a 128-value group a grid-stride
  iteration (two bf16x2 loads a lane, a warp max, one-byte stores), so a launch takes ceil(groups /
  (SMs x 64 warps)) dependent iterations, each longer the more warps are loading at once.
- QUANT_FP4: e2m1 with e4m3 scales per 16 values (vLLM scaled_fp4_quant, TensorRT-LLM
  fp4_quantize): 1 kernel, 32 rows per SM (ASSUMPTION).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.library.rows import Row, apply_config, check_kernel, gemm_shape

SCHED_DP, SCHED_PERSISTENT, SCHED_STREAM_K = 0, 1, 2
QUANT_NONE, QUANT_TOKEN_VLLM, QUANT_TOKEN_SGL, QUANT_TENSOR_TRT, QUANT_GROUP, QUANT_FP4 = 0, 1, 2, 3, 4, 5
QUANT_GROUP_TRITON, QUANT_GROUP_VLLM, QUANT_GROUP_TRT = 6, 7, 8
QUANT_VLLM_PASS_VALUES = 256 * 8  # vLLM's per-token quantizer: 256 threads x one 16-byte bf16 vector
QUANT_VLLM_GROUPS_PER_CTA = 16  # vLLM's group quantizer: 256 threads / 16 a group
# SGLang's per-token quantizer (QUANT_TOKEN_SGL above): its warp kernel from SMs x 16 tokens, its rows
# an SM, the values a pass of each form
QUANT_SGL_WARP_FROM, QUANT_SGL_WARP_ROWS_PER_SM = 2 * 8, 64
QUANT_SGL_PASS_VALUES, QUANT_SGL_WARP_PASS_VALUES = 256 * 16, 32 * 16
QUANT_KERNELS = {QUANT_NONE: 0, QUANT_TOKEN_VLLM: 1, QUANT_TOKEN_SGL: 1, QUANT_TENSOR_TRT: 2,
                 QUANT_GROUP: 1, QUANT_FP4: 1, QUANT_GROUP_TRITON: 1, QUANT_GROUP_VLLM: 1,
                 QUANT_GROUP_TRT: 1}
QUANT_ROWS_PER_SM = {QUANT_TOKEN_VLLM: 8, QUANT_TOKEN_SGL: 8, QUANT_GROUP: 32,
                     QUANT_FP4: 32, QUANT_GROUP_TRITON: 32, QUANT_GROUP_VLLM: 8,
                     QUANT_GROUP_TRT: 64}
QUANT_GROUP_MODES = (QUANT_GROUP, QUANT_GROUP_TRITON, QUANT_GROUP_VLLM, QUANT_GROUP_TRT)
# TensorRT-LLM's per-tensor quantizer (QUANT_TENSOR_TRT above): the amax kernel's grid and CTA
# threads, the quantize kernel's values a thread a pass
QUANT_TRT_AMAX_GRID, QUANT_TRT_AMAX_THREADS, QUANT_TRT_ELEMENTS = 1024, 1024, 8
# the Triton quantizer: group rounds one of its rounds takes (a program's 4 groups of 128 in turn);
# its programs along K run side by side (no K factor on its round)
QUANT_GROUPS_IN_TURN = {QUANT_GROUP_TRITON: 4}
# the activation dtype a format's GEMM reads (the FP8/FP4 contract's a_dtype values)
A_DTYPE = {"fp8": "fp8-e4m3", "fp8-block": "fp8-e4m3", "nvfp4": "fp4-e2m1", "mxfp4": "fp4-e2m1"}
DEFAULT_GROUP = {"fp8": None, "fp8-block": 128, "nvfp4": 16, "mxfp4": 32}
CLUSTER_M = 2  # CTAs per Hopper `pair` cluster along the tokens


def token_tiles(m: int, token_tile: int, pair: bool, umma: bool = False) -> int:
    """Token tiles a launch runs: with a Hopper `pair` (a TMA-multicast cluster of two along the
    tokens), rounded up to whole clusters. CUTLASS's sm90 tile schedulers size the grid in whole
    clusters (tile_scheduler_params.h: "Round up to nearest multiple of cluster dim along each
    mode", NVIDIA/cutlass include/cutlass/gemm/kernel/), and the padding CTAs run whole tiles of
    zeros (TMA fills rows past M): M = 257 on 128-token tiles in clusters of two runs four token
    tiles, not three (the published vLLM / SGLang fp8 rows step 1.86x / 1.82x from M = 256 to 257
    on H200: docs/validation.md#steps-at-tile-edges). Blackwell's 2-SM pair (`umma`) keeps the
    count FlashinferGemmParams was fitted with (a refit with whole pairs is open; TensorRT-LLM's
    untuned nvfp4 tile has no pair)."""
    tiles = cdiv(m, token_tile)
    if not pair or umma:
        return tiles
    return cdiv(tiles, CLUSTER_M) * CLUSTER_M


def wave_fill(tiles: int, sms: int) -> tuple[int, int]:
    """(waves, tiles in the last wave) of `tiles` over `sms` SMs: the terms DeepGEMM's heuristics
    rank layouts by (trtllm_fp8.py's vendored copy, deepgemm_sm100.py)."""
    return cdiv(tiles, sms), tiles % sms or sms


def scaled_config(kernel: str, m: int, n: int, token_tile: int, weight_tile: int, block_k: int,
                  sched: int, sms: int, *, swap_ab: bool = False, promote: bool = False,
                  warps: int = 12, stages: int = 4, umma: bool = False, pair: bool = False,
                  pair_n: bool = False) -> LaunchConfig:
    """One config of a scaled GEMM kernel; grid = the tiles (data-parallel) or the persistent CTAs.
    `umma`: Blackwell's tcgen05 MMA (operands read from shared memory once per MMA, the accumulator
    in tensor memory) instead of Hopper's wgmma; `pair`: CTAs run in clusters of two along the tokens
    that share each weight tile (TMA multicast on Hopper, the 2-SM MMA on Blackwell): each loads
    half of it; `pair_n`: clusters of two along the weights that share each token tile (a multicast
    of the activations: DeepGEMM's swapped sm_100 layouts), each loading half of it."""
    tiles = token_tiles(m, token_tile, pair, umma) * cdiv(n, weight_tile)
    grid = tiles if sched == SCHED_DP else min(tiles, sms)
    mma_m = 8 if swap_ab else 64
    return LaunchConfig(kernel, (grid,), token_tile, weight_tile, block_k, warps, stages,
                        extra=(("sched", sched), ("swap_ab", int(swap_ab)), ("mma_m", mma_m),
                               ("promote", int(promote)), ("umma", int(umma)), ("pair", int(pair)),
                               *((("pair_n", 1),) if pair_n else ()), ("quant", QUANT_NONE)))


def with_call(cfg: LaunchConfig, quant: int, copies: int) -> LaunchConfig:
    """The config with the measured call's activation quantization and the weight copies its
    benchmark cycled (`w_copies`; 0: not a replay) set."""
    if quant not in QUANT_KERNELS:
        raise ValueError(f"activation quantization mode {quant}: expected one of {sorted(QUANT_KERNELS)}")
    if copies < 0:
        raise ValueError(f"weight copies {copies}: expected 0 (not a replay) or more")
    extra = dict(cfg.extra)
    extra.update(quant=quant)
    if copies:
        extra.update(w_copies=copies)
    return LaunchConfig(cfg.kernel, cfg.grid, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps,
                        cfg.num_stages, cfg.split_k, cfg.group_m, tuple(extra.items()))


def scaled_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
               bias: bool, cfg: LaunchConfig, formats: tuple[str, ...]) -> Row:
    """A GEMM row of a scaled kernel that takes `formats`: w_format, group_size, a_dtype set."""
    if fmt not in formats:
        raise ValueError(f"{kernel} runs {' / '.join(formats)} weights, got {fmt}")
    if fmt == "fp8" and group_size not in (None, 0):
        raise ValueError(f"{kernel}: fp8 weights have one scale per tensor (group_size <NA>) or per "
                         f"output row (0), got group_size {group_size}")
    if fmt != "fp8" and group_size not in (None, DEFAULT_GROUP[fmt]):
        raise ValueError(f"{kernel}: {fmt} weights have group_size {DEFAULT_GROUP[fmt]}, got {group_size}")
    check_kernel(cfg, kernel)
    row = gemm_shape(m, n, k, fmt, bits, group_size if fmt == "fp8" else DEFAULT_GROUP[fmt], bias)
    row["a_dtype"] = A_DTYPE[fmt]
    return apply_config(row, cfg)


# Ada (sm_89): CUTLASS 2.x mma.sync kernels (m16n8k32 e4m3, cp.async multistage, data-parallel
# tiles, serial split-K where cuBLAS's heuristic splits); no clusters, no persistent schedule.
SM89 = 89


def sm89_config(kernel: str, m: int, n: int, token_tile: int, weight_tile: int, block_k: int,
                stages: int, warp_grid: tuple[int, int, int], *, swap_ab: bool,
                split_k: int = 1, promote: bool = False) -> LaunchConfig:
    """One config of an Ada fp8 mma.sync kernel: a data-parallel grid of token x weight tiles, each
    split into `split_k` K slices; `warp_grid` = warps along (tokens, weights, K) (CUTLASS's
    ThreadblockShape / WarpShape); `swap_ab`: the weights on the MMA's M side (cuBLAS's y^T =
    W x^T), else the tokens (vLLM's cutlass_scaled_mm, A = activations); `promote`: every K step's
    partial sums scaled into the accumulator on the CUDA cores (block-scaled kernels)."""
    warps_t, warps_w, warps_k = warp_grid
    tiles = cdiv(m, token_tile) * cdiv(n, weight_tile)
    return LaunchConfig(kernel, (tiles * split_k,), token_tile, weight_tile, block_k,
                        warps_t * warps_w * warps_k, stages, split_k=split_k,
                        extra=(("sched", SCHED_DP), ("swap_ab", int(swap_ab)),
                               ("mma_m", 8 if swap_ab else 16), ("promote", int(promote)),
                               ("umma", 0), ("pair", 0), ("sm", SM89),
                               ("warps_t", warps_t), ("warps_w", warps_w),
                               ("quant", QUANT_NONE)))
