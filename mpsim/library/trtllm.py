"""TensorRT-LLM's kernels: the weight-only GEMMs, the batched GEMV (M <= 4) and the CUTLASS fpA_intB
GEMM (M >= 5, trtllm_fpaintb.py): kernel names, launch configs and the row builder (`gemm_row(...,
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

TRTLLM_WO_MAX_ROWS = 4  # TensorRT-LLM's batched GEMV path takes M < 5 (larger M: its tiled GEMM)


def trtllm_wo_config(m: int, n: int, k: int, bits: int) -> LaunchConfig:
    """TensorRT-LLM's weight-only batched GEMV (M < 5, sm90 path, per-channel scales): CTAs of 128
    threads over 8 weight rows walking all of K in steps of 128 x (128 / bits) weights."""
    if bits not in (4, 8):
        raise ValueError(f"{TRTLLM_WO_GEMV}: bits must be 4 or 8, got {bits}")
    if not 1 <= m <= TRTLLM_WO_MAX_ROWS:
        raise ValueError(f"{TRTLLM_WO_GEMV}: the batched GEMV path takes 1..{TRTLLM_WO_MAX_ROWS} rows, "
                         f"got {m}")
    cta_k = 128 * (128 // bits)
    return LaunchConfig(TRTLLM_WO_GEMV, (1, max(1, n // 8)), m, 8, cta_k, 4, 1)


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int) -> Row:
    """A `trtllm_wo_gemv` row (per-channel int4/int8 weights, group size = K, M <= 4) or a
    `trtllm_fpaintb_gemm` row (M >= 5; config: one of its tactics, default wave_pick's)."""
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
