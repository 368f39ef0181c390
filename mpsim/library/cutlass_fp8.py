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
multicast: `pair`). SGLang's sm90 fp8_scaled_mm is priced at this dispatch too (ASSUMPTION), though
its own differs (sgl-project/sglang sgl-kernel/csrc/gemm/fp8_gemm_kernel.cu
`sm90_fp8_dispatch_shape` at 350439a5: no swap; 64 x 64 x 128 tiles to M = 256 in clusters of 1 x 8
at M = 1, 1 x 4 to 64, none to 256; 128 x 128 x 128 above, clusters of 2 x 1 past 1024): priced at
it (stop 49, a cluster along the weights multicasting the token tile) the H200 SGLang fp8 rows went
12.1 -> 13.2% (bias -6.6 -> -8.0%, M 17-256 13.4 -> 15.7%), and refitting SGLang's quantizer round
then (`sgl_round_ns`, replaced at stop 54) with `tile_ns` did not recover it (13.4%); stop 54 priced
it again (M 17-256 26.1% with SGLang's quantizer from its source:
docs/validation.md#sglangs-per-token-quantizer-stop-54). The rows point at larger tiles than that
dispatch's (stop 52): per 128-deep K step at N <= 2048 (k 1024 -> 16384) SGLang's M = 192 rows take
330-336 ns, vLLM's 128 x 128 tiles 349-356, where a 64 x 64 tile holds a quarter of those MMAs (M =
128: 135-146 ns, vLLM's 64 x 128 tiles 175-204), so SGLang 0.5.14 likely runs another build than
350439a5's. The block-scaled kernel (scaled_mm_blockwise_sm90_fp8_dispatch.cuh) runs a 128 x 128 x
128 persistent tile, promoting each 128-deep block's partial sums with its scales on the CUDA cores
as DeepGEMM does.

On Ada (sm_89) vLLM's cutlass_scaled_mm runs CUTLASS 2.x kernels instead (`cutlass_fp8_sm89_heuristic`,
read from csrc/quantization/w8a8/cutlass/scaled_mm_c2x_sm89_fp8_dispatch.cuh at 42d3ba86): mma.sync
m16n8k32 on e4m3, the tokens on the MMA's M side, one CTA per tile through the whole K (no split-K,
no stream-K), the ThreadblockShape / WarpShape / stages chosen by the next power of two of M (at
least 16) and of N (`SM89_DISPATCH`). Every tile fits the L40S's 99 KB of shared memory per CTA, so
the dispatch's fallback kernel (64 x 128 x 64, 5 stages, used where a tile does not fit) never runs
there. No blockwise fp8 kernel of CUTLASS runs on sm_89 (vLLM runs its Triton kernel there).

On Blackwell (sm_100) it runs CUTLASS 3.x tcgen05 kernels (`cutlass_fp8_sm100_heuristic`, read from
csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm100_fp8_dispatch.cuh at 487e7b0e), persistent, the
stages as many as the shared memory holds (StageCountAutoCarveout): M <= 16 swaps A and B, 128 x 32
x 128 (weights x tokens x K) in clusters of 4 along the weights; M in (16, 64] swaps with 128 x 64
x 256, clusters of 4, except M = 64 with K < 4096, 64 x 64 x 128 unswapped, no cluster; M in (64,
256] 128 x 128 x 128 (tokens x weights) in clusters of 2 along the tokens; above, 256 x 128 x 128
in clusters of 2 x 2 (the 2-SM MMA: a CTA pair of 128 token rows each splitting the weight tile,
and two pairs along the weights sharing the token tile). mpsim's clusters are pairs: a cluster of
4 along the weights is priced as a pair sharing the token tile (`pair_n`; each CTA loads a half of
it, not a quarter). The blockwise kernel keeps the sm90 dispatch's tile there (its sm100 dispatch
is not read).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, next_pow2
from mpsim.library.rows import Row
from mpsim.library.scaled_gemm import (
    SCHED_DP,
    SCHED_PERSISTENT,
    scaled_config,
    scaled_row,
    sm89_config,
)

CUTLASS_FP8_GEMM = "cutlass_fp8_gemm"
CUTLASS_FP8_BLOCK_GEMM = "cutlass_fp8_block_gemm"
KERNELS = (CUTLASS_FP8_GEMM, CUTLASS_FP8_BLOCK_GEMM)
SMALL_N = 1280  # vLLM's sm90 dispatch: the N bound of its small-M tiles
# vLLM's sm89 fp8 dispatch: (largest next_pow2(M) of the rule, [(largest next_pow2(N) or None,
# (token tile, weight tile, K tile), stages, warps along (tokens, weights, K))])
_Tile = tuple[int | None, tuple[int, int, int], int, tuple[int, int, int]]
SM89_DISPATCH: tuple[tuple[int | None, tuple[_Tile, ...]], ...] = (
    (16, ((8192, (16, 64, 128), 5, (1, 1, 2)), (24576, (16, 128, 64), 5, (1, 2, 1)),
          (None, (32, 64, 128), 5, (2, 1, 2)))),
    (32, ((8192, (32, 64, 128), 5, (2, 1, 2)), (16384, (32, 128, 128), 4, (1, 2, 2)),
          (None, (32, 64, 128), 5, (2, 1, 2)))),
    (64, ((8196, (64, 64, 128), 5, (2, 1, 2)), (16384, (64, 128, 128), 3, (1, 2, 2)),
          (None, (64, 64, 128), 5, (2, 1, 2)))),
    (128, ((8192, (64, 128, 128), 3, (1, 2, 2)), (16384, (128, 128, 64), 5, (2, 2, 1)),
           (None, (128, 64, 128), 3, (2, 1, 2)))),
    (256, ((4096, (64, 128, 128), 3, (1, 2, 2)), (None, (128, 128, 64), 5, (2, 2, 1)))),
    (None, ((4096, (128, 128, 64), 5, (2, 2, 1)), (8192, (256, 128, 64), 3, (4, 2, 1)),
            (None, (128, 128, 64), 5, (2, 2, 1)))),
)


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


def cutlass_fp8_sm89_heuristic(m: int, n: int, k: int) -> LaunchConfig:
    """vLLM's sm89 fp8 dispatch (module docstring, SM89_DISPATCH): the first rule whose M and N
    bounds hold for next_pow2(max(M, 16)) and next_pow2(N)."""
    mp2, np2 = max(16, next_pow2(m)), next_pow2(n)
    rules = next(r for top, r in SM89_DISPATCH if top is None or mp2 <= top)
    _, (tt, wt, bk), stages, grid = next(t for t in rules if t[0] is None or np2 <= t[0])
    return sm89_config(CUTLASS_FP8_GEMM, m, n, tt, wt, bk, stages, grid, swap_ab=False)


SM100_SMEM = 232448        # sm_100's shared memory per CTA (CUDA C++ Programming Guide, CC 10.0)
SM100_EPI_CARVEOUT = 32768  # ASSUMPTION: the epilogue's share StageCountAutoCarveout sets aside


def cutlass_fp8_sm100_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's sm100 fp8 dispatch (module docstring): (tokens, weights, K tile, swap, clusters)."""
    if m <= 16:
        tt, wt, bk, swap, pair, pair_n = 32, 128, 128, True, False, True
    elif m <= 64 and not (m == 64 and k < 4096):
        tt, wt, bk, swap, pair, pair_n = 64, 128, 256, True, False, True
    elif m <= 64:
        tt, wt, bk, swap, pair, pair_n = 64, 64, 128, False, False, False
    elif m <= 256:
        tt, wt, bk, swap, pair, pair_n = 128, 128, 128, False, True, False
    else:
        tt, wt, bk, swap, pair, pair_n = 128, 128, 128, False, True, True
    stage = ((tt // 2 if pair_n else tt) + (wt // 2 if pair else wt)) * bk
    stages = (SM100_SMEM - SM100_EPI_CARVEOUT) // stage
    return scaled_config(CUTLASS_FP8_GEMM, m, n, tt, wt, bk, SCHED_PERSISTENT, sms, swap_ab=swap,
                         umma=True, pair=pair, pair_n=pair_n, warps=8, stages=stages)


def cutlass_fp8_block_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's sm90 blockwise dispatch: one 128 x 128 x 128 persistent tile, CUDA-core promotion."""
    return scaled_config(CUTLASS_FP8_BLOCK_GEMM, m, n, 128, 128, 128, SCHED_PERSISTENT, sms,
                         promote=True)


def candidates(kernel: str, m: int, n: int, k: int, sms: int = GPU_SMS,
               generation: str = "hopper") -> list[LaunchConfig]:
    """The config the library's fixed dispatch picks on a GPU `generation` (no search: vLLM's
    heuristic is static); `ampere` is Ada here (sm_89: no fp8 tensor cores before it); on
    `blackwell` the sm100 dispatch (the blockwise kernel keeps the sm90 tile)."""
    if generation == "ampere":
        if kernel != CUTLASS_FP8_GEMM:
            raise ValueError(f"{kernel}: CUTLASS has no blockwise fp8 kernel for sm_89")
        return [cutlass_fp8_sm89_heuristic(m, n, k)]
    if kernel == CUTLASS_FP8_GEMM:
        if generation == "blackwell":
            return [cutlass_fp8_sm100_heuristic(m, n, k, sms)]
        return [cutlass_fp8_heuristic(m, n, k, sms)]
    return [cutlass_fp8_block_heuristic(m, n, k, sms)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A CUTLASS fp8 row: per-tensor/per-channel (`cutlass_fp8_gemm`) or 128x128 block scales."""
    cfg = config or candidates(kernel, m, n, k, sms)[0]
    formats = ("fp8",) if kernel == CUTLASS_FP8_GEMM else ("fp8-block",)
    return scaled_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg, formats)
