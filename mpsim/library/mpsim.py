"""mpsim's own Triton kernels (kernels/, what capture runs): their kernel names and row builders.
Their launch configs stay in kernels/launch_config.py, the launchers' own, so a synthesized row
carries the grid and config the real kernel launches with; mpsim/sim/gpu/library/mpsim.py prices
them.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.library.mpsim_fp import KERNELS as FP_KERNELS
from mpsim.library.rows import (
    Row,
    apply_config,
    attention_shape,
    check_fp16_prefill,
    check_kernel,
    gemm_shape,
)
from mpsim.traces.schema import KV_FORMAT_OF_BITS

FORMAT_TAGS = ("fp16", "group", "anyprec")
ROWWISE_KERNELS = ("rms_norm_kernel", "layer_norm_kernel", "rope_kernel", "residual_add_kernel",
                   "silu_mul_kernel", "gelu_kernel", "embedding_kernel", "argmax_kernel")
# gemv_group_asm_kernel: the group GEMV's inline-asm twin (kernels/gemv_group_asm.py; GPU only, with
# MPSIM_GEMV_ASM=1): a captured trace may name it; the SASS table prices it from its own rows
KERNELS = (*(f"gemv_{t}_kernel" for t in FORMAT_TAGS), *(f"gemm_{t}_kernel" for t in FORMAT_TAGS),
           "gemv_group_asm_kernel",
           lc.DECODE_ATTENTION_KERNEL, "attention_prefill_kernel", "kv_quant_kernel",
           *ROWWISE_KERNELS, *FP_KERNELS)  # FP_KERNELS: the fp8 / fp4 kernels (mpsim_fp.py)


def family(fmt: str) -> str:
    """The kernel family tag of a trace w_format: fp16, group or anyprec."""
    return "fp16" if fmt == "fp16" else ("anyprec" if fmt == "anyprec" else "group")


def gemm(m: int, n: int, k: int, w_format: str, bits: int, group_size: int | None, bias: bool,
         on_gpu: bool) -> Row:
    """A GEMV/GEMM row with the launcher's own config (lc.gemm_config)."""
    cfg = lc.gemm_config(m, n, k, w_format, bits, group_size, on_gpu=on_gpu)
    return apply_config(gemm_shape(m, n, k, w_format, bits, group_size, bias), cfg)


def gemm_row(kernel: str | None, m: int, n: int, k: int, fmt: str, bits: int,
             group_size: int | None, bias: bool, *, on_gpu: bool, config: lc.LaunchConfig | None,
             sms: int) -> Row:
    """One GEMV/GEMM of mpsim's: the heuristic's config, or `config` (one of lc.gemm_candidates)."""
    row = gemm(m, n, k, fmt, bits, group_size, bias, on_gpu)
    if config is not None:
        check_kernel(config, row["kernel"], f"gemv_{family(fmt)}_kernel", f"gemm_{family(fmt)}_kernel")
        apply_config(row, config)
    return row


def attention(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
              kv_bits: int, kv_block: int | None, on_gpu: bool) -> Row:
    """Decode attention (q_len 1) over a cache of kv_bits, or causal prefill over fp16 K/V."""
    decode = q_len == 1
    if decode:
        cfg = lc.attention_decode_config(batch, heads, kv_heads, head_dim, kv_len, kv_bits, kv_block,
                                         on_gpu=on_gpu)
    else:
        cfg = lc.attention_prefill_config(batch, q_len, heads, kv_heads, head_dim, on_gpu=on_gpu)
    row = attention_shape(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits)
    row.update(kv_block=kv_block if decode else None, kv_tokens=batch * kv_len if decode else None)
    return apply_config(row, cfg)


def attention_row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                  kv_bits: int, kv_block: int | None, *, on_gpu: bool, kv_append: bool,
                  l2_warm: bool, sms: int, fp8_attention: bool = False) -> Row:
    """One attention launch of mpsim's kernels (kv_append, l2_warm and fp8_attention describe other
    libraries)."""
    check_fp16_prefill(q_len, kv_bits)
    if kv_append or l2_warm or fp8_attention:
        raise MpsimInputError("attention: kv_append, l2_warm and fp8_attention describe other "
                              "libraries' rows (kernel='fa3', 'trtllm', 'sglang')")
    return attention(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits, kv_block, on_gpu)


def rowwise(op: str, kernel: str, module: str, layer: int, m: int, n: int, k: int | None,
            on_gpu: bool) -> Row:
    """A row-wise launch (norm, RoPE, activation, residual add, embedding, argmax)."""
    cfg = lc.rowwise_config(kernel, m, k or n, on_gpu=on_gpu)
    return apply_config({"op": op, "module": module, "layer": layer, "m": m, "n": n, "k": k}, cfg)


def kv_write(layer: int, batch: int, q_len: int, kv_heads: int, head_dim: int, kv_bits: int,
             kv_block: int | None, on_gpu: bool) -> Row:
    """The KV write of one layer: the new tokens' K and V quantized into the cache."""
    cfg = lc.kv_quant_config(batch * q_len, kv_heads, head_dim, kv_bits, on_gpu=on_gpu)
    return apply_config({"op": "kv_quant", "module": "kv_write", "layer": layer, "batch": batch,
                         "q_len": q_len, "num_kv_heads": kv_heads, "head_dim": head_dim,
                         "k_bits": kv_bits, "v_bits": kv_bits, "kv_block": kv_block,
                         "kv_format": KV_FORMAT_OF_BITS[kv_bits]}, cfg)
