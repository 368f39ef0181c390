"""vLLM's Machete W4A16 / W8A16 GEMM for Hopper: its kernel name, the tile its generated heuristic
picks and its row builder (`gemm_row(..., kernel=MACHETE_GEMM)`); priced by
mpsim/sim/gpu/library/machete.py.

Source: vllm-project/vllm csrc/quantization/machete/generate.py (`default_tile_heuristic_config`,
"tuned for H100s"; schedule TmaMI cooperative, StreamK tile scheduler), machete_mainloop.cuh and
machete_prepacked_layout.cuh (weights prepacked into the wgmma A-register layout).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library.rows import Row
from mpsim.library.wo_tiled import (
    SCHED_STREAM_K,
    SM90_SMEM_BYTES,
    check_format,
    tile_stages,
    wo_config,
    wo_row,
)

MACHETE_GEMM = "machete_gemm"
KERNELS = (MACHETE_GEMM,)


def machete_tile(m: int, n: int, k: int) -> tuple[int, int]:
    """(weight tile, token tile) by generate.py's default_tile_heuristic_config, first match."""
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
    """The heuristic's tile, cooperative mixed-input main loop (two consumer warpgroups per 128
    weight rows), StreamK scheduler, a 64-deep K tile of fp16."""
    wt, tt = machete_tile(m, n, k)
    stages = tile_stages(wt, tt, 64, bits, SM90_SMEM_BYTES, wt * min(tt, 32) * 2)
    return wo_config(MACHETE_GEMM, m, n, k, bits, tt, wt, 64, stages, SCHED_STREAM_K,
                     128 * (1 + wt // 64), sms=sms)


def candidates(m: int, n: int, k: int, bits: int, group: int, sms: int = GPU_SMS,
               arch: str = "hopper") -> list[LaunchConfig]:
    """Machete's heuristic picks one schedule per shape."""
    return [machete_config(m, n, k, bits, sms)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `machete_gemm` row: int4/int8 weights, group-wise or per channel."""
    check_format(kernel, fmt)
    cfg = config or machete_config(m, n, k, bits, sms)
    return wo_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg)
