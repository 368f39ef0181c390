"""TensorRT-LLM's kernels: the weight-only GEMMs, the batched GEMV (M <= 15) and the CUTLASS fpA_intB
GEMM (trtllm_fpaintb.py), the weight-only plugins' profiled tactics (`plugin_candidates`: the
validation adapter and `--config best` take the fastest; the engine file keeps the GEMV at M <= 4
and CUTLASS above): kernel names, launch configs and the row builder (`gemm_row(...,
kernel=TRTLLM_WO_GEMV | TRTLLM_FPAINTB)`); and the attention op (XQA / MMHA decode, the context FMHA:
trtllm_attention.py, `attention_row(..., kernel="trtllm")`); mpsim/sim/gpu/library/trtllm.py prices
their rows.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import LaunchConfig
from mpsim.library.rows import Row, apply_config, check_kernel, gemm_shape
from mpsim.library.trtllm_attention import ATTENTION_KERNELS
from mpsim.library.trtllm_attention import attention_row as attention_row
from mpsim.library.trtllm_fpaintb import (
    TRTLLM_AWQ_PRESCALE,
    TRTLLM_FPAINTB,
    fpaintb_candidates,
    prescale_config,
)
from mpsim.library.wo_tiled import check_format, wave_pick, wo_row

TRTLLM_WO_GEMV = "trtllm_wo_gemv"
KERNELS = (TRTLLM_WO_GEMV, TRTLLM_FPAINTB, TRTLLM_AWQ_PRESCALE, *ATTENTION_KERNELS)
OPS = {TRTLLM_AWQ_PRESCALE: "other"}  # its row-wise kernel: AWQ's pre-quant scale (trtllm_fpaintb.py)
PRESCALE_KERNELS = (TRTLLM_AWQ_PRESCALE,)  # quantizers whose output stays 16-bit (engine files)

TRTLLM_WO_MAX_ROWS = 4  # M < SMALL_M_FAST_PATH (5): the older plugins' GEMV rule (engine files)
# weightOnlyBatchedGemv/kernelDispatcher.h: DISPATCHER_FOR_M(1..15), CtaM = M, CtaN 8, 128 threads
TRTLLM_WO_GEMV_MAX_ROWS = 15


# kernelLauncher.h `kernel_launcher` (TileSizeK 64): the weight layout, by SM version, sets the rows
# a CTA covers (CtaN 8 x kInterleave) and the weights a thread loads a step (kStepK)
GEMV_THREADS = 128
GEMV_CTA_N = 8


def gemv_layout(arch: str, bits: int) -> tuple[int, int]:
    """(kInterleave, kStepK) of the batched GEMV's weight layout (details.h): sm_90 runs
    ColumnMajorInterleavedForHopper (1, 128 / bits: one 16-byte load a row a step), sm_100
    ColumnMajor (1, 8: 8 weights a row a step, 32-bit loads), sm_75..89 and sm_120
    ColumnMajorInterleaved (1024 / (64 x bits) rows interleaved: int4 4, int8 2; 128 / bits)."""
    if arch == "hopper":
        return 1, 128 // bits
    if arch == "blackwell":
        return 1, 8
    return 1024 // (64 * bits), 128 // bits


def trtllm_wo_config(m: int, n: int, k: int, bits: int, arch: str = "hopper") -> LaunchConfig:
    """TensorRT-LLM's weight-only batched GEMV (per-channel scales, M 1..15) on `arch`'s layout:
    CTAs of 128 threads over 8 x kInterleave weight rows (block_n) walking all of K, a step of
    128 x kStepK interleaved weights covering 128 x kStepK / kInterleave of K (block_k); `sm80` 1
    marks the pre-Hopper build (its own fixed costs, TrtllmParams.sm80_*)."""
    if bits not in (4, 8):
        raise ValueError(f"{TRTLLM_WO_GEMV}: bits must be 4 or 8, got {bits}")
    if not 1 <= m <= TRTLLM_WO_GEMV_MAX_ROWS:
        raise ValueError(f"{TRTLLM_WO_GEMV}: the batched GEMV takes 1..{TRTLLM_WO_GEMV_MAX_ROWS} rows, "
                         f"got {m}")
    interleave, step_k = gemv_layout(arch, bits)
    rows = GEMV_CTA_N * interleave
    extra = (("sm80", 1),) if arch not in ("hopper", "blackwell") else ()
    return LaunchConfig(TRTLLM_WO_GEMV, (1, max(1, n // rows)), m, rows,
                        GEMV_THREADS * step_k // interleave, 4, 1, extra=extra)


def plugin_candidates(m: int, n: int, k: int, bits: int, sms: int,
                      arch: str = "hopper") -> list[LaunchConfig]:
    """The tactics TensorRT-LLM's weight-only plugins profile for an M-row call: the CUTLASS fpA_intB
    tiles and, for M < 16, the batched GEMV as one more tactic (plugins/common/gemmPluginProfiler.cpp
    profileTactics: the CUDA kernel is the last tactic, dropped above M = 16, and checkTactic keeps
    it for M < 16 only; the plugin's enqueue runs the GEMV when the best tactic has
    enableCudaKernel). The profiler keeps whichever it timed fastest: `best_config` over these."""
    cands = fpaintb_candidates(m, n, k, bits, sms, arch)
    if m <= TRTLLM_WO_GEMV_MAX_ROWS:
        cands.append(trtllm_wo_config(m, n, k, bits, arch))
    return cands


def engine_config(m: int, n: int, k: int, bits: int, sms: int, arch: str) -> LaunchConfig:
    """The weight-only plugin's choice without a profiled one, on `arch`: the batched GEMV below
    M = 5 (the older plugins' rule, TRTLLM_WO_MAX_ROWS), else `wave_pick` over the architecture's
    CUTLASS tiles (Hopper's on sm_90, the CUTLASS 2 tiles elsewhere)."""
    if m <= TRTLLM_WO_MAX_ROWS:
        return trtllm_wo_config(m, n, k, bits, arch)
    return wave_pick(fpaintb_candidates(m, n, k, bits, sms, arch), m, sms)


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `trtllm_wo_gemv` row (per-channel int4/int8 weights, group size = K, M <= 15) or a
    `trtllm_fpaintb_gemm` row (config: one of `plugin_candidates`, the GEMV's making the row a
    GEMV row; without one, the GEMV for M <= 4, else wave_pick's CUTLASS tile)."""
    if kernel == TRTLLM_FPAINTB and (config.kernel == TRTLLM_WO_GEMV if config is not None
                                     else m <= TRTLLM_WO_MAX_ROWS):
        # the profiler's fastest tactic was the batched GEMV; without a profiled choice, the
        # older plugins' fixed rule (M < SMALL_M_FAST_PATH runs the GEMV)
        kernel = TRTLLM_WO_GEMV
    if kernel == TRTLLM_FPAINTB:
        check_format(kernel, fmt)
        cfg = config or wave_pick(fpaintb_candidates(m, n, k, bits, sms), m, sms)
        return wo_row(kernel, m, n, k, fmt, bits, group_size, bias, cfg)
    if fmt not in ("int4-group", "int8-group"):
        raise ValueError(f"{kernel} prices per-channel int4/int8 weights, got {fmt}")
    cfg = config or trtllm_wo_config(m, n, k, bits)
    check_kernel(cfg, kernel)
    return apply_config(gemm_shape(m, n, k, fmt, bits, k, bias), cfg)  # per channel: G = K


def rowwise_row(kernel: str, tokens: int, hidden: int, *, heads: int = 0, kv_heads: int = 0,
                head_dim: int = 0, sms: int = 0) -> Row:
    """A `trtllm_awq_prescale` row: `tokens` rows of a GEMM's `hidden` (= K) wide input multiplied
    by AWQ's per-channel pre-quant scale (op other, m tokens, n = K)."""
    if kernel != TRTLLM_AWQ_PRESCALE:
        raise ValueError(f"not a TensorRT-LLM row-wise kernel: {kernel!r}; expected {TRTLLM_AWQ_PRESCALE}")
    row: Row = {"op": OPS[kernel], "module": kernel, "m": tokens, "n": hidden, "k": None}
    return apply_config(row, prescale_config(tokens, hidden))
