"""vLLM's row-wise kernels (Vidur's measured RMSNorm, rotary embedding, SiLU-and-mul): kernel
names, launch configs and row builders (`framework_op_row(VLLM_RMS_NORM, ...)`);
mpsim/sim/gpu/library/vllm.py prices them.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import LaunchConfig, cdiv
from mpsim.library.rows import Row, apply_config

VLLM_RMS_NORM = "vllm_rms_norm"
VLLM_ROPE = "vllm_rotary_embedding"
VLLM_SILU_MUL = "vllm_silu_and_mul"
KERNELS = (VLLM_RMS_NORM, VLLM_ROPE, VLLM_SILU_MUL)
OPS = {VLLM_RMS_NORM: "norm", VLLM_ROPE: "rope", VLLM_SILU_MUL: "act"}


def rowwise_config(kernel: str, tokens: int, width: int, *, heads: int = 0,
                   head_dim: int = 0) -> LaunchConfig:
    """vLLM's one-block-per-token row-wise kernels: threads = min(width, 1024); RoPE: min(query
    heads x head_dim / 2, 512)."""
    if kernel == VLLM_ROPE:
        threads = min(heads * head_dim // 2, 512)
    elif kernel in (VLLM_RMS_NORM, VLLM_SILU_MUL):
        threads = min(width, 1024)
    else:
        raise ValueError(f"not a vLLM row-wise kernel: {kernel!r}; expected one of {list(KERNELS)}")
    threads = max(32, threads)
    return LaunchConfig(kernel, (tokens,), None, threads, None, cdiv(threads, 32), 1)


def rowwise_row(kernel: str, tokens: int, hidden: int, *, heads: int, kv_heads: int,
                head_dim: int) -> Row:
    """RMSNorm over `hidden` wide rows, SiLU-and-mul with output width `hidden` (input 2 x hidden),
    RoPE over the query and key heads."""
    row: Row = {"op": OPS[kernel], "module": kernel, "m": tokens, "n": hidden, "k": None}
    if kernel == VLLM_ROPE:
        if min(heads, kv_heads, head_dim) < 1:
            raise MpsimInputError("rope: heads, kv_heads and head_dim must be >= 1")
        row.update(n=(heads + kv_heads) * head_dim, k=head_dim, num_q_heads=heads,
                   num_kv_heads=kv_heads, head_dim=head_dim)
    elif kernel == VLLM_SILU_MUL:
        row["k"] = 2 * hidden
    return apply_config(row, rowwise_config(kernel, tokens, hidden, heads=heads, head_dim=head_dim))
