"""One byte/FLOP accounting for every launch: synthesis, capture and the simulators all call it.

Bytes are analytic DRAM traffic assuming each operand is read once and each output written once
(tiling re-reads that hit in cache are the simulator's business, not the accountant's). Weight bytes
follow docs/formats.md: uniform group formats carry an fp16 scale and zero per group; any-precision at
b bits reads b bit-planes plus the b-bit LUT of each row (at b <= 3 the GEMV and GEMM read the row's
pair table instead, gemm_weight_bytes); quantized KV carries an fp16 scale and zero
per token per head, for K and V separately.

Floating-point formats (issue 26; docs/fp8-policies.md): the weights and a GEMM's activations below
(LOW_FLOAT_FORMATS, activation_bytes); an fp8 e4m3 KV cache (kv_format fp8-e4m3) stores 1 B a value,
its per-tensor scale (4 B a layer) no per-token cost; the activation-quantization launches before a
W8A8 / A4 GEMM (_act_quant) read the 16-bit activations and write the quantized ones with their scales.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mpsim.traces.errors import TraceError
from mpsim.traces.schema import COLLECTIVE_OPS

FP16 = 2
INDEX_BYTES = 8  # token ids and argmax results are int64
PAGED_BLOCK_ENTRY = 4  # int32 block-table entry per KV block


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes_read: int
    bytes_written: int


# Any-precision widths whose GEMV and GEMM (every row count) read the per-row pair table instead of
# the 2^b LUT (kernels/gemm_anyprec.py, docs/formats.md): (2^b)^2 fp16 pairs a row, 256 B at 3 bits;
# 4 bits would take 1 KiB a row (docs/kernels.md, "ap4's pair table": not taken)
PAIR_MAX_BITS = 3
# Any-precision widths whose 2..16-row GEMV and tiled GEMM read the LUT as 32-bit words, 4 bytes an
# entry (kernels/lut_words.py, which names its widths from this)
LUT_WORDS_BITS = (4,)


def anyprec_pair_bytes(n: int, w_bits: int) -> int:
    """Bytes of the pair tables of an N-row any-precision weight at w_bits (0 above PAIR_MAX_BITS)."""
    return n * (4**w_bits) * 2 * FP16 if w_bits <= PAIR_MAX_BITS else 0


def gemm_weight_bytes(m: int, n: int, k: int, w_format: str, w_bits: int,
                      group_size: int | None) -> int:
    """Weight bytes a GEMM/GEMV launch with m activation rows reads: weight_bytes, except that
    any-precision launches at <= PAIR_MAX_BITS read the pair table instead of the LUT (at every m:
    the one-row GEMV, the few-row GEMV and the tiled GEMM all look their weights up in it), and at
    LUT_WORDS_BITS with two or more rows the LUT's 32-bit words (4 bytes an entry: kernels/
    lut_words.py)."""
    read = weight_bytes(n, k, w_format, w_bits, group_size)
    if w_format == "anyprec" and w_bits <= PAIR_MAX_BITS:
        read += anyprec_pair_bytes(n, w_bits) - n * (2**w_bits) * FP16
    elif w_format == "anyprec" and w_bits in LUT_WORDS_BITS and m > 1:
        read += n * (2**w_bits) * FP16
    return read


def weight_bytes(n: int, k: int, w_format: str, w_bits: int, group_size: int | None) -> int:
    """Bytes of an N x K weight (y = x @ W.T) stored in `w_format` and read at `w_bits`."""
    if w_format == "fp16":
        return n * k * FP16
    if w_format == "anyprec":
        return math.ceil(n * k * w_bits / 8) + n * (2**w_bits) * FP16
    if w_format.endswith("-group"):
        return padded_k(k, group_size) * n * w_bits // 8 + group_param_bytes(n, k, group_size)
    if w_format in LOW_FLOAT_FORMATS:
        return math.ceil(n * k * w_bits / 8) + weight_scale_bytes(n, k, w_format, group_size)
    raise TraceError(f"unknown w_format {w_format!r}")


# Low-precision float weights (docs/formats.md, the FP8/FP4 contract): fp8 e4m3 with one fp32 scale
# per tensor (group_size <NA>) or per output row (group_size 0); fp8-block with one fp32 scale per
# 128 x 128 block (DeepSeek-V3); nvfp4 e2m1 with one e4m3 scale per 16 values plus one fp32 tensor
# scale; mxfp4 e2m1 with one e8m0 scale per 32 values.
LOW_FLOAT_FORMATS = ("fp8", "fp8-block", "nvfp4", "mxfp4")
FP32 = 4
FP8_BLOCK = 128
NVFP4_BLOCK = 16
MXFP4_BLOCK = 32


def weight_scale_bytes(n: int, k: int, w_format: str, group_size: int | None) -> int:
    """The scale bytes of an N x K low-precision float weight (see LOW_FLOAT_FORMATS)."""
    if w_format == "fp8":
        return n * FP32 if group_size == 0 else FP32
    if w_format == "fp8-block":
        return _cdiv(n, FP8_BLOCK) * _cdiv(k, FP8_BLOCK) * FP32
    if w_format == "nvfp4":
        return n * _cdiv(k, NVFP4_BLOCK) + FP32
    if w_format == "mxfp4":
        return n * _cdiv(k, MXFP4_BLOCK)
    raise TraceError(f"not a low-precision float weight format: {w_format!r}")


# GEMM activations (a_dtype): 16-bit, or quantized by the call with their scales: fp8 e4m3 per
# token (one fp32 per row; per 1 x 128 group under fp8-block weights), fp4 e2m1 with nvfp4's
# e4m3 scale per 16 values and an fp32 tensor scale.
A_DTYPES = ("fp16", "bf16", "fp8-e4m3", "fp4-e2m1")


def activation_bytes(m: int, k: int, a_dtype: str, w_format: str) -> int:
    """Bytes of the M x K activation a GEMM reads, in `a_dtype` with its scales."""
    if a_dtype in ("fp16", "bf16"):
        return m * k * FP16
    if a_dtype == "fp8-e4m3":
        groups = _cdiv(k, FP8_BLOCK) if w_format == "fp8-block" else 1
        return m * k + m * groups * FP32
    if a_dtype == "fp4-e2m1":
        return math.ceil(m * k / 2) + m * _cdiv(k, NVFP4_BLOCK) + FP32
    raise TraceError(f"unknown a_dtype {a_dtype!r}; expected one of {A_DTYPES}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def group_param_bytes(n: int, k: int, group_size: int | None) -> int:
    """A group weight's fp16 scale and zero bytes, N x (KP / G) x 2 x 2 (one group a row when whole-row):
    the bytes its scale-zero words take too (kernels/sz_words.py)."""
    groups = 1 if group_size is None or _whole_row(k, group_size) else padded_k(k, group_size) // group_size
    return n * groups * 2 * FP16


def padded_k(k: int, group_size: int | None) -> int:
    """K as a quantized weight stores it (docs/formats.md): rounded up to 32 and to the group G.

    Whole-row groups (G None, <= 0 such as -1, or G == K) and formats without groups (any-precision,
    G None) pad K to a multiple of 32 only; the whole-row group is then that padded K.
    """
    k32 = _round_up(k, 32)
    if group_size is None or _whole_row(k, group_size):
        return k32
    return _round_up(k32, group_size)


def _whole_row(k: int, group_size: int) -> bool:
    """-1 (reference/group_quant.py's WHOLE_ROW), 0 (a policy's "grow") or K: one group per row."""
    return group_size <= 0 or group_size == k


E4M3 = 1  # bytes of an fp8 value (KV cache, quantized activations) or of an e4m3 / e8m0 scale


def kv_bytes_per_token_head(head_dim: int, bits: int, kv_format: str | None = None) -> int:
    """Bytes of one cached token of one KV head, for K or for V: 16-bit values; int codes plus an fp16
    scale and zero; fp8 e4m3 values alone (per-tensor scale). `kv_format` None: by bits (int)."""
    if bits == 16:
        return head_dim * FP16
    if kv_format == "fp8-e4m3":
        return head_dim * E4M3
    return math.ceil(head_dim * bits / 8) + 2 * FP16


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _gemm(r: Mapping[str, Any]) -> Cost:
    m, n, k = r["m"], r["n"], r["k"]
    bias = bool(r.get("bias") or False)
    a_dtype = str(r["a_dtype"]) if _given(r.get("a_dtype")) else "fp16"
    read = activation_bytes(m, k, a_dtype, str(r["w_format"])) \
        + gemm_weight_bytes(m, n, k, r["w_format"], r["w_bits"], r.get("group_size"))
    read += n * FP16 if bias else 0
    return Cost(2 * m * n * k + (m * n if bias else 0), read, m * n * FP16)


def causal_pairs(q_len: int, kv_len: int, window: int = 0) -> int:
    """(query, key) pairs a causal mask keeps when the q_len queries are the last of kv_len keys;
    with a sliding `window` (> 0) a query sees at most that many keys, its own included."""
    if window <= 0 or window >= kv_len:
        return q_len * (kv_len - q_len) + q_len * (q_len + 1) // 2
    lo, hi = kv_len - q_len + 1, kv_len  # keys the first and last query would see unwindowed
    if lo > window:
        return window * q_len
    return (lo + window) * (window - lo + 1) // 2 + window * (hi - window)


def attention_window(r: Mapping[str, Any]) -> int:
    """The sliding window of an attention row (its config's `window`: keys a query sees; 0: none).
    The config is a dict while a row is built, JSON text in a trace."""
    cfg: Any = r.get("config")
    if isinstance(cfg, str):  # parsed only when it names a window (most rows have none)
        cfg = json.loads(cfg) if '"window"' in cfg else {}
    return int(cfg.get("window", 0)) if isinstance(cfg, Mapping) else 0


def decode_kv_tokens(r: Mapping[str, Any]) -> int | None:
    """KV tokens a decode attention launch reads over its batch: the `kv_tokens` column when the
    row has it (sequences of different lengths), else batch x kv_len; None for prefill (q_len > 1)."""
    if r["q_len"] != 1:
        return None
    tokens: Any = r.get("kv_tokens")
    return int(tokens) if _given(tokens) else int(r["batch"] * r["kv_len"])


def _given(value: Any) -> bool:
    """A value that is not None, NaN or pandas' NA."""
    try:
        return value is not None and bool(value == value)
    except TypeError:  # pd.NA == pd.NA is NA, whose truth value is an error
        return False


def _kv_format(r: Mapping[str, Any]) -> str | None:
    value = r.get("kv_format")
    return str(value) if _given(value) else None


def _attention(r: Mapping[str, Any]) -> Cost:
    b, q, kv = r["batch"], r["q_len"], r["kv_len"]
    hq, hkv, d = r["num_q_heads"], r["num_kv_heads"], r["head_dim"]
    decode_tokens = decode_kv_tokens(r)
    window = attention_window(r)
    window = window if 0 < window < kv else 0
    # keys read once per sequence: a sliding window reads from the first query's window start
    first = max(0, kv - q - window + 1) if window else 0
    if decode_tokens is not None and window:  # at most `window` keys a sequence
        decode_tokens = min(decode_tokens, b * window)
    # (query, key) pairs over the batch; decode: one query per sequence over its own cache
    pairs = decode_tokens if decode_tokens is not None else \
        b * (causal_pairs(q, kv, window) if r["causal"] else q * kv)
    tokens = decode_tokens if decode_tokens is not None else b * (kv - first)
    fmt = _kv_format(r)
    kv_read = hkv * tokens * (kv_bytes_per_token_head(d, r["k_bits"], fmt)
                              + kv_bytes_per_token_head(d, r["v_bits"], fmt))
    block = r.get("kv_block")
    table = b * math.ceil(tokens / b / block) * PAGED_BLOCK_ENTRY if block else 0
    q_read = b * q * hq * d * FP16
    # QK^T and PV: 2 FLOPs per multiply-add each; softmax's exp/max/sum ~5 FLOPs per score.
    flops = hq * pairs * (4 * d + 5)
    return Cost(flops, q_read + kv_read + table, b * q * hq * d * FP16)


def _kv_quant(r: Mapping[str, Any]) -> Cost:
    tokens_heads = r["batch"] * r["q_len"] * r["num_kv_heads"]
    d = r["head_dim"]
    fmt = _kv_format(r)
    written = tokens_heads * (kv_bytes_per_token_head(d, r["k_bits"], fmt)
                              + kv_bytes_per_token_head(d, r["v_bits"], fmt))
    quantized = (r["k_bits"] < 16) + (r["v_bits"] < 16)
    return Cost(tokens_heads * d * 4 * quantized, tokens_heads * d * 2 * FP16, written)


def _rowwise(read_rows: int, write_rows: int, params: int, flops_per: int) -> Callable[..., Cost]:
    """A row-wise op over m rows: reads `read_rows` inputs of width n (k for act), writes outputs."""

    def cost(r: Mapping[str, Any]) -> Cost:
        m, n = r["m"], r["n"]
        width_in = r["k"] if r.get("k") is not None and r["op"] == "act" else n
        read = m * width_in * FP16 * read_rows + params * n * FP16
        return Cost(flops_per * m * width_in, read, m * n * FP16 * write_rows)

    return cost


def _rope(r: Mapping[str, Any]) -> Cost:
    m, n = r["m"], r["n"]
    return Cost(6 * m * (r["k"] or n), m * n * FP16 + m * INDEX_BYTES, m * n * FP16)


def _embed(r: Mapping[str, Any]) -> Cost:
    m, n = r["m"], r["n"]
    return Cost(0, m * INDEX_BYTES + m * n * FP16, m * n * FP16)


def _sample(r: Mapping[str, Any]) -> Cost:
    m, n = r["m"], r["n"]
    return Cost(m * n, m * n * FP16, m * INDEX_BYTES)


def _act_quant(group: int | None, fp4: bool) -> Callable[[Mapping[str, Any]], Cost]:
    """A GEMM's activations quantized row-wise (m tokens x n = K): reads fp16, writes fp8 values and
    fp32 scales (one per token, or per `group`), or fp4 values, e4m3 scales per 16 and an fp32 per
    tensor (which it reads); ~3 FLOPs a value (abs-max, scale, convert)."""

    def cost(r: Mapping[str, Any]) -> Cost:
        m, n = r["m"], r["n"]
        if fp4:
            written = math.ceil(m * n / 2) + m * _cdiv(n, NVFP4_BLOCK) * E4M3
            return Cost(3 * m * n, m * n * FP16 + FP32, written)
        groups = 1 if group is None else _cdiv(n, group)
        return Cost(3 * m * n, m * n * FP16, m * n * E4M3 + m * groups * FP32)

    return cost


# Small ops are told apart by kernel name (kernels/launch_config.py names them); the norm parameter
# count differs between RMSNorm (weight) and LayerNorm (weight, bias).
_SMALL_OPS: dict[str, Callable[[Mapping[str, Any]], Cost]] = {
    "rms_norm_kernel": _rowwise(1, 1, 1, 4),
    # TensorRT-LLM's AWQ pre-quant scale (preQuantScaleKernel.cu): x * s per channel, fp16 out
    "trtllm_awq_prescale": _rowwise(1, 1, 1, 1),
    "layer_norm_kernel": _rowwise(1, 1, 2, 8),
    "silu_mul_kernel": _rowwise(1, 1, 0, 3),
    "gelu_kernel": _rowwise(1, 1, 0, 8),
    "residual_add_kernel": _rowwise(2, 1, 0, 1),
    "rope_kernel": _rope,
    "embedding_kernel": _embed,
    "argmax_kernel": _sample,
    # other frameworks' kernels of the same ops (mpsim/library/vllm.py, torch.py): vLLM's
    # RMSNorm, SiLU-and-mul and rotary embedding, PyTorch's elementwise add
    "vllm_rms_norm": _rowwise(1, 1, 1, 4),
    "vllm_silu_and_mul": _rowwise(1, 1, 0, 3),
    "vllm_rotary_embedding": _rope,
    "torch_add": _rowwise(2, 1, 0, 1),
    # activation quantization before a W8A8 / A4 GEMM (mpsim/library/act_quant.py)
    "fp8_act_quant": _act_quant(None, fp4=False),
    "fp8_block_act_quant": _act_quant(FP8_BLOCK, fp4=False),
    "nvfp4_act_quant": _act_quant(None, fp4=True),
    # mpsim's own (kernels/fp8_act_quant.py): per token, and per 1 x 128 group (fp8b)
    "fp8_act_quant_kernel": _act_quant(None, fp4=False),
    "fp8_group_quant_kernel": _act_quant(FP8_BLOCK, fp4=False),
}
SMALL_OP_KERNELS = tuple(_SMALL_OPS)


def _collective(r: Mapping[str, Any]) -> Cost:
    """A collective's local work on each rank: the additions of a reduction ((n-1)/n of the elements
    per rank in a ring or two-shot scheme), its buffer read from and the result written to HBM
    (all-gather: the rank's share read, the gathered output written; reduce-scatter: the input read,
    the rank's share written). What crosses the links is `msg_bytes` (mpsim/sim/collectives.py)."""
    op, size, group = r["op"], int(r["msg_bytes"]), int(r["tp"])
    elements = size // FP16
    adds = elements * (group - 1) // group if op in ("allreduce", "reducescatter") else 0
    read = size // group if op == "allgather" else size
    written = size // group if op == "reducescatter" else size
    return Cost(adds, read, written)


def launch_cost(row: Mapping[str, Any]) -> Cost:
    """FLOPs and DRAM bytes of one launch, from the shape and format columns of its trace row."""
    op = row["op"]
    if op in COLLECTIVE_OPS:
        return _collective(row)
    if op == "gemm":
        return _gemm(row)
    if op == "attention":
        return _attention(row)
    if op == "kv_quant":
        return _kv_quant(row)
    kernel = row["kernel"]
    if kernel in _SMALL_OPS:
        return _SMALL_OPS[kernel](row)
    raise TraceError(
        f"no accounting for op {op!r} kernel {kernel!r}; small ops must be one of {SMALL_OP_KERNELS}"
    )
