"""cuBLAS fp16/bf16 GEMM on Hopper: its kernel name, the tile x schedule candidates its heuristic
picks among, and its row builder (`gemm_row(..., kernel=CUBLAS_GEMM)`).

Rows measured on cuBLAS name `cublas_gemm`; mpsim/sim/gpu/library/cublas.py prices them. A config
carries the settings cuBLAS would pick (or the candidates an autotuner of it would try).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv, next_pow2
from mpsim.library.rows import Row, apply_config, check_kernel, gemm_shape

CUBLAS_GEMM = "cublas_gemm"
KERNELS = (CUBLAS_GEMM,)

# cuBLAS on Hopper: warp-specialized wgmma kernels, one CTA per SM, the weights on the wgmma M side
# (64-row warpgroups), the tokens on its N side (any multiple of 8 up to 256).
CUBLAS_TOKEN_TILES = (16, 32, 64, 128, 256)
CUBLAS_WEIGHT_TILES = (64, 128, 256)
CUBLAS_MAX_ACC = 128 * 256   # accumulator elements of two consumer warpgroups
CUBLAS_BLOCK_K = 64
CUBLAS_SMEM_BYTES = 220 * 1024


def cublas_config(m: int, n: int, k: int, token_tile: int, weight_tile: int, stream_k: bool,
                  sms: int = GPU_SMS) -> LaunchConfig:
    """One cuBLAS-like config: data-parallel tiles (grid = tiles) or persistent stream-K (grid =
    min(tile K-trips, SMs), every (tile, K trip) unit dealt evenly over the CTAs)."""
    tiles = cdiv(m, token_tile) * cdiv(n, weight_tile)
    units = tiles * cdiv(k, CUBLAS_BLOCK_K)
    stage = (token_tile + weight_tile) * CUBLAS_BLOCK_K * 2
    stages = max(2, min(8, CUBLAS_SMEM_BYTES // stage))
    grid = min(units, sms) if stream_k else tiles
    return LaunchConfig(CUBLAS_GEMM, (grid,), token_tile, weight_tile, CUBLAS_BLOCK_K, 12, stages,
                        extra=(("stream_k", int(stream_k)),))


def cublas_candidates(m: int, n: int, k: int, sms: int = GPU_SMS) -> list[LaunchConfig]:
    """The tile x schedule candidates a cuBLAS heuristic picks among (data-parallel and stream-K)."""
    out = []
    for tt in CUBLAS_TOKEN_TILES:
        for wt in CUBLAS_WEIGHT_TILES:
            if tt * wt <= CUBLAS_MAX_ACC:
                out.append(cublas_config(m, n, k, tt, wt, False, sms))
                out.append(cublas_config(m, n, k, tt, wt, True, sms))
    return out


def cublas_heuristic(m: int, n: int, k: int, sms: int = GPU_SMS) -> LaunchConfig:
    """A fixed choice when no autotune is wanted: stream-K, tokens tile the next power of two."""
    tt = min(128, max(16, next_pow2(m)))
    return cublas_config(m, n, k, tt, 256, True, sms)


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `cublas_gemm` row: 16-bit weights (fp16/bf16), config `config` or the heuristic's."""
    if fmt != "fp16":
        raise ValueError(f"{kernel} prices 16-bit weights (fp16/bf16), got {fmt}")
    cfg = config or cublas_heuristic(m, n, k, sms)
    check_kernel(cfg, kernel)
    return apply_config(gemm_shape(m, n, k, fmt, bits, None, bias), cfg)
