"""Launch configs of the weight-only (fp16 activations x int4/int8 weights) GEMM libraries.

Every kernel here is a mixed-input tiled GEMM: a CTA owns a weight tile WT (output features) by a
token tile TT, walks K in trips of BK, loads the packed weights and the 16-bit activations, converts
the weights to fp16 in registers and feeds the tensor cores. A config is a LaunchConfig with
block_m = TT, block_n = WT, block_k = BK, num_stages, split_k and `sched` in `extra`:
SCHED_DP (one CTA per tile), SCHED_PERSISTENT (min(tiles, SMs) CTAs walk the tiles),
SCHED_STREAM_K (min(tile K-trips, SMs) CTAs, every (tile, trip) unit dealt evenly, split tiles
fixed up), SCHED_SPLIT_K (split_k CTAs per tile, serial reduction). The work models are
mpsim/sim/gpu/{fpaintb,marlin,machete,turbomind}_work.py; sources of every rule are in each
function's docstring and docs/kernels-weight-only.md.
"""

from __future__ import annotations

from mpsim.kernels.launch_base import GPU_SMS, LaunchConfig, cdiv

TRTLLM_FPAINTB = "trtllm_fpaintb_gemm"
MARLIN_GEMM = "marlin_gemm"
MACHETE_GEMM = "machete_gemm"
TURBOMIND_GEMM = "turbomind_gemm"
WO_GEMM_KERNELS = (TRTLLM_FPAINTB, MARLIN_GEMM, MACHETE_GEMM, TURBOMIND_GEMM)
SCHED_DP, SCHED_PERSISTENT, SCHED_STREAM_K, SCHED_SPLIT_K = 0, 1, 2, 3

# TRT-LLM fpA_intB on sm90 (fpA_intB_gemm_template_sm90.h, launchers/fpA_intB_launcher_sm90.inl):
# A and B swapped so the narrow weights are the wgmma A operand (register-sourced after the
# in-register convert): CTA shape = (weight rows 64|128) x (tokens 16..256) x (128 B of fp16 = 64).
FPAINTB_WEIGHT_TILES = (64, 128)
FPAINTB_TOKEN_TILES = (16, 32, 64, 128, 256)
FPAINTB_BLOCK_K = 64
SM90_SMEM_BYTES = 232448          # cutlass::arch::sm90_smem_capacity_bytes (227 KiB)
FPAINTB_MIN_ROWS = 5              # weightOnlyQuantMatmulPlugin: m < SMALL_M_FAST_PATH (5) -> GEMV

# Marlin (vllm csrc/quantization/gptq_marlin/gptq_marlin.cu): (thread_k, thread_n, threads), first
# valid in priority order; the small table when thread_m_blocks == 1 (M <= 16), else the large.
MARLIN_SMALL = ((128, 128, 256), (64, 128, 128), (128, 64, 128))
MARLIN_LARGE = ((64, 256, 256), (64, 128, 128), (128, 64, 128))
MARLIN_STAGES = 4                 # marlin.cuh: pipe_stages = 4
MARLIN_M_BLOCK = 16               # rows per m-block; at most 4 m-blocks (64 rows) per pass

def _tile_stages(wt: int, tt: int, bk: int, bits: int, smem: int, carve: int) -> int:
    stage = wt * bk * bits // 8 + tt * bk * 2 + wt * 2
    return max(2, (smem - carve) // stage)


def wo_config(kernel: str, m: int, n: int, k: int, bits: int, tt: int, wt: int, bk: int,
              stages: int, sched: int, threads: int, split_k: int = 1,
              sms: int = GPU_SMS) -> LaunchConfig:
    """One config of a weight-only GEMM kernel; the grid follows the schedule."""
    if bits not in (4, 8):
        raise ValueError(f"{kernel}: weight bits must be 4 or 8, got {bits}")
    tiles = cdiv(m, tt) * cdiv(n, wt)
    units = tiles * cdiv(k, bk)
    grid = {SCHED_DP: tiles, SCHED_PERSISTENT: min(tiles, sms), SCHED_STREAM_K: min(units, sms),
            SCHED_SPLIT_K: tiles * split_k}[sched]
    return LaunchConfig(kernel, (grid,), tt, wt, bk, threads // 32, stages, split_k,
                        extra=(("sched", sched),))


def fpaintb_config(m: int, n: int, k: int, bits: int, tt: int, wt: int,
                   sms: int = GPU_SMS) -> LaunchConfig:
    """TRT-LLM's CUTLASS fpA_intB on sm90: a 64-row weight tile runs the ping-pong schedule on
    cutlass::gemm::PersistentScheduler, a 128-row tile the cooperative one on StreamKScheduler
    (launcher: TileScheduler = size<0>(CTAShape) == 64 ? Persistent : StreamK); stages fill the
    shared memory left after the epilogue (StageCountAutoCarveout)."""
    if m < FPAINTB_MIN_ROWS:
        raise ValueError(f"{TRTLLM_FPAINTB}: the plugin runs the batched GEMV for m < "
                         f"{FPAINTB_MIN_ROWS}, got m={m}")
    stages = _tile_stages(wt, tt, FPAINTB_BLOCK_K, bits, SM90_SMEM_BYTES, wt * min(tt, 32) * 2)
    sched = SCHED_PERSISTENT if wt == 64 else SCHED_STREAM_K
    return wo_config(TRTLLM_FPAINTB, m, n, k, bits, tt, wt, FPAINTB_BLOCK_K, stages, sched,
                     128 * (1 + wt // 64), sms=sms)


def fpaintb_candidates(m: int, n: int, k: int, bits: int, sms: int = GPU_SMS,
                       arch: str = "hopper") -> list[LaunchConfig]:
    """The tactics TRT-LLM's plugin profiler times (cutlass_heuristic.cpp get_candidate_tiles_sm90:
    64 and 128 weight rows x 16..256 tokens; the 2x1/1x2/2x2 cluster variants only change the L2
    multicast, which the model does not price, so they are one candidate each). Before Hopper:
    fpaintb_candidates_sm80."""
    if arch != "hopper":
        return fpaintb_candidates_sm80(m, n, k, bits, sms)
    return [fpaintb_config(m, n, k, bits, tt, wt, sms)
            for wt in FPAINTB_WEIGHT_TILES for tt in FPAINTB_TOKEN_TILES]


# cutlass_heuristic.cpp get_candidate_tiles, WeightOnly, sm >= 75: CtaShape (tokens x weights x 64)
# 16x128, 16x256, 32x128, 64x128, 128x128, four warps each (WarpShape M x 32|64 x 64); stages 2..4
# on sm >= 80; split-K serial 1..SPLIT_K_LIMIT (fpA_intB_gemm.h: 7) where K and K / split are
# multiples of 64 (is_valid_split_k_factor).
FPAINTB_SM80_TILES = ((16, 128), (16, 256), (32, 128), (64, 128), (128, 128))
FPAINTB_SPLIT_K_LIMIT = 7


def fpaintb_candidates_sm80(m: int, n: int, k: int, bits: int,
                            sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The Ampere/Ada tactics (mma.sync, CUTLASS 2 multistage, serial split-K). Only the 4-stage
    variant of each tile is a candidate: the model prices a deeper pipeline no slower, so the 2-
    and 3-stage ones the profiler also times never win here."""
    out = []
    for tt, wt in FPAINTB_SM80_TILES:
        for s in range(1, FPAINTB_SPLIT_K_LIMIT + 1):
            if k % FPAINTB_BLOCK_K == 0 and k % s == 0 and (k // s) % FPAINTB_BLOCK_K == 0:
                sched = SCHED_DP if s == 1 else SCHED_SPLIT_K
                cfg = wo_config(TRTLLM_FPAINTB, m, n, k, bits, tt, wt, FPAINTB_BLOCK_K, 4, sched,
                                128, s, sms)
                out.append(LaunchConfig(cfg.kernel, cfg.grid, tt, wt, FPAINTB_BLOCK_K, 4, 4, s,
                                        extra=(*cfg.extra, ("sm80", 1))))
    if not out:
        raise ValueError(f"{TRTLLM_FPAINTB}: K={k} is not a multiple of 64")
    return out


def marlin_config(m: int, n: int, k: int, bits: int, group: int,
                  sms: int = GPU_SMS) -> LaunchConfig:
    """vLLM's gptq_marlin: thread_m_blocks = min(ceil(M / 16), 4); the first (thread_k, thread_n)
    of the small (M <= 16) or large table that divides K and N; one CTA per SM walking striped
    (tile, K-slice) units with a serial global reduction (Marlin's striped partitioning, a
    stream-K); 4 cp.async stages. M > 64 runs ceil(M / 64) 64-row problems in the same grid."""
    blocks = min(cdiv(m, MARLIN_M_BLOCK), 4)
    table = MARLIN_SMALL if blocks == 1 else MARLIN_LARGE
    for tk, tn, threads in table:
        if k % tk == 0 and n % tn == 0:
            return wo_config(MARLIN_GEMM, m, n, k, bits, blocks * MARLIN_M_BLOCK, tn, tk,
                             MARLIN_STAGES, SCHED_STREAM_K, threads, sms=sms)
    raise ValueError(f"{MARLIN_GEMM}: no thread config divides K={k}, N={n} (needs K % 64 and "
                     "N % 64 == 0)")


def machete_tile(m: int, n: int, k: int) -> tuple[int, int]:
    """(weight tile, token tile) by vLLM machete generate.py default_tile_heuristic_config."""
    if m > 256:
        return (128, 128) if k <= 16384 and n <= 4096 else (128, 256)
    if m > 128:
        if k <= 4096 and n <= 4096:
            return 128, 64
        return (128, 128) if k <= 8192 and n <= 8192 else (128, 256)
    if m > 64:
        if k <= 4069 and n <= 4069:   # sic: 4069 in the source
            return 128, 32
        if k <= 4069 and n <= 8192:
            return 128, 64
        return (256, 128) if k >= 8192 and n >= 12288 else (128, 128)
    if m > 32:
        if k <= 6144 and n <= 6144:
            return 128, 16
        return (256, 64) if k >= 16384 and n >= 12288 else (128, 64)
    if m > 16:
        return (128, 32) if k <= 12288 and n <= 8192 else (256, 32)
    return (256, 16) if n >= 26624 else (128, 16)


def machete_config(m: int, n: int, k: int, bits: int, sms: int = GPU_SMS) -> LaunchConfig:
    """Machete (Hopper W4A16/W8A16): the heuristic's tile, cooperative mixed-input mainloop (two
    consumer warpgroups per 128 weight rows), StreamK tile scheduler, 64-deep K tile of fp16."""
    wt, tt = machete_tile(m, n, k)
    stages = _tile_stages(wt, tt, 64, bits, SM90_SMEM_BYTES, wt * min(tt, 32) * 2)
    return wo_config(MACHETE_GEMM, m, n, k, bits, tt, wt, 64, stages, SCHED_STREAM_K,
                     128 * (1 + wt // 64), sms=sms)


# TurboMind (InternLM/lmdeploy src/turbomind/kernels/gemm): ASSUMPTION, see turbomind_work.py:
# the candidate set is a representative subset of its sm80 s16816 u4 kernels (CTA M x N x K,
# stages), chosen per shape by its dispatcher's cost estimate, split-K up to 4.
TURBOMIND_TILES = ((16, 128, 128, 4), (32, 128, 128, 4), (64, 128, 64, 4), (128, 128, 64, 3),
                   (128, 256, 32, 3))
TURBOMIND_SPLITS = (1, 2, 4)


def turbomind_candidates(m: int, n: int, k: int, bits: int,
                         sms: int = GPU_SMS) -> list[LaunchConfig]:
    """TurboMind's W4A16 kernels a dispatcher picks among: token tile x weight tile x K tile and
    stages, data-parallel or split-K (splits dividing K into whole K tiles)."""
    out = []
    for tt, wt, bk, stages in TURBOMIND_TILES:
        for s in TURBOMIND_SPLITS:
            if k % (bk * s) == 0:
                sched = SCHED_DP if s == 1 else SCHED_SPLIT_K
                out.append(wo_config(TURBOMIND_GEMM, m, n, k, bits, tt, wt, bk, stages, sched,
                                     256, s, sms))
    if not out:
        raise ValueError(f"{TURBOMIND_GEMM}: K={k} is not a multiple of a K tile (32)")
    return out


def wo_candidates(kernel: str, m: int, n: int, k: int, bits: int, group: int,
                  sms: int = GPU_SMS, arch: str = "hopper") -> list[LaunchConfig]:
    """Every config a model-guided search may pick for `kernel` (the library's own choice where it
    has a fixed heuristic: Marlin, Machete); `arch` the candidate family (hopper or ampere)."""
    if kernel == TRTLLM_FPAINTB:
        return fpaintb_candidates(m, n, k, bits, sms, arch)
    if kernel == MARLIN_GEMM:
        return [marlin_config(m, n, k, bits, group, sms)]
    if kernel == MACHETE_GEMM:
        return [machete_config(m, n, k, bits, sms)]
    if kernel == TURBOMIND_GEMM:
        return turbomind_candidates(m, n, k, bits, sms)
    raise ValueError(f"not a weight-only GEMM kernel: {kernel!r}; expected one of {WO_GEMM_KERNELS}")


def wo_heuristic(kernel: str, m: int, n: int, k: int, bits: int, group: int,
                 sms: int = GPU_SMS) -> LaunchConfig:
    """A fixed config without a search: the library's heuristic (Marlin, Machete), else the
    smallest token tile that holds M (cutlass_heuristic.cpp: "keep small tile sizes when
    possible") and, among those, the fewest idle SMs in the last wave (its wave score)."""
    cands = wo_candidates(kernel, m, n, k, bits, group, sms)
    if len(cands) == 1:
        return cands[0]
    fits = [c for c in cands if (c.block_m or 0) >= m] or cands
    smallest = min(c.block_m or 0 for c in fits)
    fits = [c for c in fits if c.block_m == smallest]

    def score(c: LaunchConfig) -> tuple[float, int]:
        ctas = c.programs
        return cdiv(ctas, sms) - ctas / sms, -(c.block_n or 0)
    return min(fits, key=score)
