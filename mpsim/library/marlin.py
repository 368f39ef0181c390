"""vLLM's Marlin W4A16 / W8A16 GEMM (gptq_marlin, awq_marlin): its kernel name, the thread config
its launcher picks and its row builder (`gemm_row(..., kernel=MARLIN_GEMM)`); priced by
mpsim/sim/gpu/library/marlin.py.

Source: vllm-project/vllm csrc/quantization/gptq_marlin/gptq_marlin.cu (thread configs in priority
order, determine_exec_config: the first valid), marlin.cuh (4 pipeline stages), IST-DASLab/marlin
(one CTA per SM, striped partitioning with a serial global reduction).
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv
from mpsim.library.rows import Row
from mpsim.library.wo_tiled import SCHED_STREAM_K, check_format, wo_config, wo_row

MARLIN_GEMM = "marlin_gemm"
KERNELS = (MARLIN_GEMM,)
# (thread_k, thread_n, threads): the small table when thread_m_blocks == 1 (M <= 16), else the large
MARLIN_SMALL = ((128, 128, 256), (64, 128, 128), (128, 64, 128))
MARLIN_LARGE = ((64, 256, 256), (64, 128, 128), (128, 64, 128))
MARLIN_STAGES = 4
MARLIN_M_BLOCK = 16               # rows per m-block; at most 4 m-blocks (64 rows) per pass


def marlin_config(m: int, n: int, k: int, bits: int, group: int,
                  sms: int = GPU_SMS) -> LaunchConfig:
    """thread_m_blocks = min(ceil(M / 16), 4); the first (thread_k, thread_n) of the small or large
    table that divides K and N; one CTA per SM walking striped (tile, K-slice) units with a serial
    global reduction (a stream-K); M > 64 runs ceil(M / 64) 64-row problems in the same grid."""
    blocks = min(cdiv(m, MARLIN_M_BLOCK), 4)
    for tk, tn, threads in MARLIN_SMALL if blocks == 1 else MARLIN_LARGE:
        if k % tk == 0 and n % tn == 0:
            return wo_config(MARLIN_GEMM, m, n, k, bits, blocks * MARLIN_M_BLOCK, tn, tk,
                             MARLIN_STAGES, SCHED_STREAM_K, threads, sms=sms)
    raise ValueError(f"{MARLIN_GEMM}: no thread config divides K={k}, N={n} (needs K % 64 and "
                     "N % 64 == 0)")


def candidates(m: int, n: int, k: int, bits: int, group: int, sms: int = GPU_SMS,
               arch: str = "hopper") -> list[LaunchConfig]:
    """Marlin has no autotuner: its one config."""
    return [marlin_config(m, n, k, bits, group, sms)]


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `marlin_gemm` row: int4/int8 weights, group 128 or per channel (group 0 / None / K)."""
    check_format(kernel, fmt)
    cfg = config or marlin_config(m, n, k, bits, group_size or k, sms)
    return wo_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg)
