"""mpsim's own fp8 / fp4 kernels (issue 26; kernels/gemm_fp8.py, gemm_fp8b.py, gemv_fp4.py,
fp8_act_quant.py, attention_decode_fp8.py) as synthesized trace rows: what their launchers record,
from the same config functions (kernels/launch_config_fp.py). mpsim/sim/gpu/library/mpsim.py prices
them (their SASS mix: mpsim/sim/gpu/sass_table_fp.py).

A W8A8 GEMM is two launches, as the engine runs it: the activation quantization (fp8 per token:
`fp8_act_quant_kernel`; fp8b per 1 x 128 group: `fp8_group_quant_kernel`; op `other`, m tokens,
n = K) and the GEMM on codes (a_dtype fp8-e4m3). The FP4 formats are weight-only (A16): one
`gemv_fp4_kernel` launch. An fp8 e4m3 KV cache is written by `kv_fp8_quant_kernel` (one launch a
layer, K and V heads stacked) and read by `attention_decode_fp8_kernel`.
"""

from __future__ import annotations

from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.kernels import launch_config_fp as lf
from mpsim.library.rows import Row, apply_config, attention_shape, gemm_shape

ACT_QUANT_KERNELS = ("fp8_act_quant_kernel", "fp8_group_quant_kernel")
GEMM_KERNELS = ("gemm_fp8_kernel", "gemm_fp8b_kernel", "gemv_fp4_kernel")
KV_FP8_QUANT_KERNEL, DECODE_FP8_KERNEL = lf.KV_FP8_QUANT_KERNEL, lf.DECODE_FP8_KERNEL
KERNELS = (*GEMM_KERNELS, *ACT_QUANT_KERNELS, KV_FP8_QUANT_KERNEL, DECODE_FP8_KERNEL)
FP8_CACHE = "fp8-e4m3"


def gemm_rows(m: int, n: int, k: int, w_format: str, bits: int, group_size: int | None, bias: bool,
              on_gpu: bool) -> list[Row]:
    """The launches of y = x @ W.T with W stored in `w_format` (fp8, fp8-block, nvfp4, mxfp4)."""
    shape = gemm_shape(m, n, k, w_format, bits, group_size, bias)
    if w_format == "fp8":
        quant = lf.act_quant_config(m, k, on_gpu=on_gpu)
        gemm = lf.gemm_fp8_config(m, n, k, on_gpu=on_gpu)
    elif w_format == "fp8-block":
        quant = lf.group_quant_config(m, k)
        gemm = lf.gemm_fp8b_config(m, n, k, on_gpu=on_gpu)
    elif w_format in lf.FP4_BLOCKS:
        b = lf.FP4_BLOCKS[w_format]
        return [apply_config(shape, lf.gemv_fp4_config(m, n, lc.cdiv(k, b) * b, w_format, on_gpu=on_gpu))]
    else:
        raise MpsimInputError(f"{w_format} weights: mpsim's fp kernels run fp8, fp8-block, nvfp4 and "
                              "mxfp4")
    shape["a_dtype"] = FP8_CACHE
    row: Row = {"op": "other", "m": m, "n": k, "k": None, "a_dtype": "fp16", "out_dtype": FP8_CACHE}
    return [apply_config(row, quant), apply_config(shape, gemm)]


def kv_write(layer: int, batch: int, q_len: int, kv_heads: int, head_dim: int,
             kv_block: int | None) -> Row:
    """The fp8 KV write of one layer: the new tokens' K and V heads, stacked, in one launch."""
    cfg = lf.kv_fp8_quant_config(batch * q_len, 2 * kv_heads, head_dim)
    return apply_config({"op": "kv_quant", "module": "kv_write", "layer": layer, "batch": batch,
                         "q_len": q_len, "num_kv_heads": kv_heads, "head_dim": head_dim,
                         "k_bits": 8, "v_bits": 8, "kv_block": kv_block, "kv_format": FP8_CACHE}, cfg)


def decode_attention(batch: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
                     kv_block: int | None, on_gpu: bool, graph_capacity: int | None = None) -> Row:
    """Decode attention over the fp8 e4m3 cache (one query token a sequence); `graph_capacity`: a
    CUDA-graph replay, launched with max_kv_len = the capacity (kernels/launch_config.py
    attention_decode_graph_config)."""
    cfg = lf.attention_decode_fp8_config(batch, heads, kv_heads, head_dim, graph_capacity or kv_len,
                                         kv_block, on_gpu=on_gpu)
    row = attention_shape(batch, 1, kv_len, heads, kv_heads, head_dim, 8, FP8_CACHE)
    row.update(kv_block=kv_block, kv_tokens=batch * kv_len)
    return apply_config(row, cfg)


IDENTITY = ("module", "layer", "phase", "step", "stage", "tp")


def as_own(row: Row, on_gpu: bool = True) -> list[Row]:
    """A row built as a shape for an engine to rebuild (mpsim/launch_plan.py PassShape.rebuilt:
    serving) as mpsim's own launches: an fp8 / fp4 GEMM's (kernel None) through `gemm_rows`, an fp8
    cache's KV write and decode attention (built by mpsim's int-cache builders) through the fp8
    kernels; any other row (another engine's launches included) as it is."""
    if row.get("kernel") in KERNELS:  # built already
        return [row]
    keep = {c: row[c] for c in IDENTITY if c in row}
    if row["op"] == "gemm" and row.get("kernel") is None:
        rows = gemm_rows(int(row["m"]), int(row["n"]), int(row["k"]), str(row["w_format"]),
                         int(row["w_bits"]), row.get("group_size"), bool(row.get("bias")), on_gpu)
        module = str(row.get("module", "gemm"))
        for r in rows:
            r.update(keep, module=module if r["op"] == "gemm" else f"{module}_act_quant")
        return rows
    if row.get("kv_format") != FP8_CACHE or row.get("kernel") not in ("kv_quant_kernel",
                                                                       lc.DECODE_ATTENTION_KERNEL):
        return [row]  # not an fp8 cache's row of mpsim's int-cache kernels (another engine's: as is)
    if row["op"] == "kv_quant":
        return [{**kv_write(int(row["layer"]), int(row["batch"]), int(row["q_len"]),
                            int(row["num_kv_heads"]), int(row["head_dim"]), row.get("kv_block")), **keep}]
    if row["op"] == "attention" and int(row["q_len"]) == 1:
        built = decode_attention(int(row["batch"]), int(row["kv_len"]), int(row["num_q_heads"]),
                                 int(row["num_kv_heads"]), int(row["head_dim"]), row.get("kv_block"), on_gpu)
        built.update(keep, kv_tokens=row.get("kv_tokens", built["kv_tokens"]))
        return [built]
    return [row]
