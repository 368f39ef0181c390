"""Readers for published measurement tables, into the generic rows of measured.py.

Sources (docs/validation.md#the-data says where to get them):

- aiconfigurator `gemm_perf.parquet`: `gemm_dtype` bfloat16 -> 16-bit fp16 (mpsim reads bf16 and
  fp16 alike); int4_wo / int8_wo -> int{4,8}-group per-channel (group_size = k, fp16 activations);
  fp8 -> fp8 (per-tensor W8A8), fp8_block -> fp8-block (group 128), nvfp4 -> nvfp4 (group 16)
  (the adapter prices each with the kernel its kernel_source names, the call's activation
  quantization included); sq (SmoothQuant W8A8) and anything else -> unrepresentable. Protocol:
  rows whose kernel_source is a TensorRT layer (`trt_flow_...`) were timed by TensorRT's
  per-layer profiler (`trt-profiler`); vLLM's fp8_block rows without a CUDA graph (`eager`:
  aiconfigurator collector/vllm/collect_gemm.py, use_cuda_graph=gemm_type != "fp8_block"); all
  others in a CUDA graph (`graph`). `latency` is in ms.
- aiconfigurator `generation_attention_perf.parquet` (decode: q_len 1, kv_len = step + 1) and
  `context_attention_perf.parquet` (causal prefill: q_len = kv_len = isl), protocol `graph`. Op
  scope by framework: vLLM and SGLang time KV append + attention (`kv_append`), TRT-LLM RoPE + KV
  append + attention (`rope+kv_append`). `framework`, `version` and `kernel_source` are carried
  (framework lower-cased, version as `fw_version`): the adapter prices each row with the kernel that
  ran it (docs/validation.md "Which kernel stands for a row"). Quirks: sliding-window rows
  (window_size > 0) carry `window` (priced where the kernel's room models it), beam width > 1 is
  unrepresentable; a decode fp8 (e4m3) KV cache is kv_bits
  8 with kv_dtype fp8 (its own class); prefill with an fp8 KV cache ("attention prefill fp8-kv") or
  FP8 attention compute ("attention prefill fp8", attn_dtype fp8) is priced for TRT-LLM's context
  FMHA, FA3's fp8 forward (an fp8 cache, kernel_source `fa3`: SGLang) and SGLang's Triton extend
  kernel (`triton`: q, k, v handed over in e4m3), prefill with an fp8 KV cache also for SGLang's
  Triton backend (`triton`: the prompt's own bf16 K/V), vLLM's FlashInfer kernels
  (`vllm_flashinfer_*`) and FA3 (`vllm_flash_attn_fa3`: its backend quantizes the query whenever
  the cache is fp8, whatever the row's attn_dtype says), and unrepresentable for the others.
- Vidur `mlp.csv`: one input row holds ten ops of one token count, so it becomes one measured row
  per (input row, op), each carrying the whole input row plus `vidur_op`. Statistic: the `mean`
  over the 20 layers (ms). Protocol `kernel` (CUPTI durations). Shapes are the per-GPU shards of
  the row's tensor-parallel degree. `emb` (embedding lookup) is outside the op vocabulary.
- anything else ending in .csv: the generic CSV (measured.read_generic_csv).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.measured import (
    EXTRA,
    GENERIC_COLUMNS,
    INT_COLUMNS,
    Measurements,
    check_rows,
    read_csv_file,
    read_generic_csv,
)
from mpsim.errors import MpsimInputError

GEMM_COLUMNS = {"gemm_dtype", "m", "n", "k", "latency"}
ATTENTION_COLUMNS = {"op_name", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim",
                     "kv_cache_dtype", "attn_dtype", "step", "latency"}
WO_BITS = {"int4_wo": 4, "int8_wo": 8}
# gemm_dtype -> (w_format, w_bits, group_size) of the FP8/FP4 contract (fp8: one scale per tensor)
FLOAT_FORMATS = {"fp8": ("fp8", 8, pd.NA), "fp8_block": ("fp8-block", 8, 128), "nvfp4": ("nvfp4", 4, 16)}
SCOPE_BY_FRAMEWORK = {"vllm": "kv_append", "sglang": "kv_append", "trtllm": "rope+kv_append"}
TRTLLM_FLASHINFER = "torch_flow_flashinfer"  # TensorRT-LLM's FlashInfer attention backend
VIDUR_OPS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
             "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
VIDUR_STAT = "mean"
VIDUR_SIZES = ("num_tokens", "num_tensor_parallel_workers", "n_embd", "n_expanded_embd", "n_head",
               "n_kv_head")


def read_measurements(path: str | Path) -> Measurements:
    """Read a measured table, whichever source it is (by its columns), into generic rows; a value a
    source's columns cannot hold (text for a size, a NaN count) is one error naming the file, and
    every row's time and sizes are checked (check_rows)."""
    path = Path(path)
    try:
        measured = _read_source(path)
    except MpsimInputError as exc:
        if str(path) in str(exc):
            raise
        raise MpsimInputError(f"{path}: {exc}") from None
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:  # a column of the wrong type
        raise MpsimInputError(f"{path}: a column holds values its source does not write "
                              f"({type(exc).__name__}: {exc})") from None
    check_rows(measured.rows, str(path))
    return measured


def _read_source(path: Path) -> Measurements:
    if not path.is_file():
        raise MpsimInputError(f"{path}: no such measurement file")
    if path.suffix == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise MpsimInputError(f"{path}: not a readable Parquet file ({exc})") from None
        if set(frame.columns) >= GEMM_COLUMNS:
            return read_aic_gemm(frame)
        if set(frame.columns) >= ATTENTION_COLUMNS:
            return read_aic_attention(frame)
        raise MpsimInputError(f"{path}: not an aiconfigurator gemm_perf / *_attention_perf table "
                              f"(columns {list(frame.columns)})")
    if path.suffix == ".csv":
        head = read_csv_file(path, nrows=0).columns
        if "num_tokens" in head and f"time_stats.add.{VIDUR_STAT}" in head:
            return read_vidur(read_csv_file(path))
        return read_generic_csv(path)
    raise MpsimInputError(f"{path}: expected a .parquet (aiconfigurator) or .csv (Vidur mlp.csv or "
                          "the generic measurement CSV) file")


def _blank(n: int) -> pd.DataFrame:
    rows = pd.DataFrame({c: pd.array([pd.NA] * n, dtype="Int64") for c in INT_COLUMNS})
    for c in ("op", "w_format", "protocol", "includes", "cls", "kv_dtype", "framework", "fw_version",
              "kernel_source", "attn_dtype"):
        rows[c] = ""
    rows["status"] = "ok"
    rows["in_forward"] = False
    rows["measured_us"] = np.nan
    return rows


def _finish(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[list(GENERIC_COLUMNS) + list(EXTRA)].reset_index(drop=True)


def _mark(rows: pd.DataFrame, mask: np.ndarray | pd.Series, reason: str) -> None:
    """Set `reason` as the status of the rows in `mask` that are still ok."""
    hit = np.asarray(mask, dtype=bool) & (rows["status"] == "ok").to_numpy()
    rows.loc[hit, "status"] = reason


def read_aic_gemm(frame: pd.DataFrame) -> Measurements:
    d = frame.reset_index(drop=True)
    rows = _blank(len(d))
    dtype = d["gemm_dtype"].astype(str)
    rows["op"] = "gemm"
    for c in ("m", "n", "k"):
        rows[c] = d[c].astype("Int64")
    rows["measured_us"] = d["latency"].to_numpy(dtype=float) * 1e3
    _carry(d, rows)
    trt = rows["kernel_source"].str.startswith("trt_flow").to_numpy()
    rows["protocol"] = np.where(trt, "trt-profiler", "graph")
    bf16 = dtype.isin(["bfloat16", "float16"]).to_numpy()
    rows.loc[bf16, "w_format"], rows.loc[bf16, "w_bits"] = "fp16", 16
    wo = dtype.isin(list(WO_BITS)).to_numpy()
    bits = dtype.map(WO_BITS)
    rows.loc[wo, "w_bits"] = bits[wo].astype("Int64")
    rows.loc[wo, "w_format"] = "int" + bits[wo].astype(int).astype(str) + "-group"
    rows.loc[wo, "group_size"] = rows.loc[wo, "k"]  # per-channel: one group per row
    rows["cls"] = "gemm " + dtype.replace({"bfloat16": "bf16", "float16": "fp16"})
    low = dtype.isin(list(FLOAT_FORMATS)).to_numpy()
    for name, (fmt, bits, group) in FLOAT_FORMATS.items():
        at = (dtype == name).to_numpy()
        rows.loc[at, "w_format"], rows.loc[at, "w_bits"], rows.loc[at, "group_size"] = fmt, bits, group
    eager = (rows["framework"] == "vllm").to_numpy() & (dtype == "fp8_block").to_numpy()
    rows.loc[eager, "protocol"] = "eager"  # vLLM's collector times fp8_block without a CUDA graph
    other = ~(bf16 | wo | low)  # the message names the dtype and the kernel that ran the row
    kernel = rows["kernel_source"].replace("", "unnamed")
    why = ("unrepresentable: gemm_dtype " + dtype + " (kernel " + kernel + ") has no mpsim weight "
           "format (SmoothQuant W8A8)")
    rows.loc[other, "status"] = why[other]
    notes = ["bfloat16 GEMMs are priced as fp16 (equal tensor-core rates on Hopper and Ampere)",
             "int4_wo/int8_wo are per-channel (group_size = k) weight-only GEMMs",
             "fp8 is per-tensor W8A8 e4m3, fp8_block 128x128 block-scaled, nvfp4 e2m1 with e4m3 scales "
             "per 16; each call includes its dynamic activation quantization; vLLM's fp8_block rows "
             "are eager (protocol eager: no CUDA graph)"]
    return Measurements("aiconfigurator gemm_perf", frame, _finish(rows), notes)


def _carry(d: pd.DataFrame, rows: pd.DataFrame) -> None:
    """The framework (lower-cased), its version and the kernel the source names, as text."""
    rows["framework"] = d["framework"].astype(str).str.lower().to_numpy() if "framework" in d else ""
    for col, src in (("fw_version", "version"), ("kernel_source", "kernel_source")):
        rows[col] = d[src].astype(str).to_numpy() if src in d else ""


def read_aic_attention(frame: pd.DataFrame) -> Measurements:
    d = frame.reset_index(drop=True)
    rows = _blank(len(d))
    decode = (d["op_name"].astype(str) == "generation_attention").to_numpy()
    step = d["step"].astype("Int64")
    isl = d["isl"].astype("Int64")
    rows["op"] = "attention"
    rows["batch"] = d["batch_size"].astype("Int64")
    rows["heads"] = d["num_heads"].astype("Int64")
    rows["kv_heads"] = d["num_key_value_heads"].astype("Int64")
    rows["head_dim"] = d["head_dim"].astype("Int64")
    rows["q_len"] = pd.array(np.where(decode, 1, isl.to_numpy(dtype=np.int64)), dtype="Int64")
    rows["kv_len"] = pd.array(np.where(decode, step.to_numpy(dtype=np.int64) + 1,
                                       isl.to_numpy(dtype=np.int64)), dtype="Int64")
    rows["measured_us"] = d["latency"].to_numpy(dtype=float) * 1e3
    rows["protocol"] = "graph"
    framework = d["framework"].astype(str).str.lower() if "framework" in d else pd.Series("", index=d.index)
    rows["includes"] = framework.map(SCOPE_BY_FRAMEWORK).fillna("kv_append").to_numpy()
    if "kernel_source" in d:  # TensorRT-LLM's FlashInfer backend: RoPE runs outside its op (the
        # collector hands it no positional embedding, as serving does: collector/trtllm/collect_attn.py)
        rows.loc[(d["kernel_source"].astype(str) == TRTLLM_FLASHINFER).to_numpy(), "includes"] = "kv_append"
    _carry(d, rows)
    rows["attn_dtype"] = d["attn_dtype"].astype(str).to_numpy()
    kv = d["kv_cache_dtype"].astype(str)
    fp8_kv = (kv == "fp8").to_numpy()
    fp8_attn = (rows["attn_dtype"] == "fp8").to_numpy()
    rows["kv_bits"] = pd.array(np.where(fp8_kv, 8, 16), dtype="Int64")
    rows.loc[fp8_kv, "kv_dtype"] = "fp8"
    prefill = np.where(fp8_attn, "attention prefill fp8",
                       np.where(fp8_kv, "attention prefill fp8-kv", "attention prefill"))
    rows["cls"] = np.where(~decode, prefill,
                           np.where(fp8_kv, "attention decode fp8-kv", "attention decode kv16"))
    source = d["kernel_source"].astype(str) if "kernel_source" in d else pd.Series("", index=d.index)
    fp8_prefill_kernel = (framework == "trtllm").to_numpy() | source.str.startswith(
        FP8_PREFILL_SOURCES).to_numpy()
    fa3 = source.isin(FP8_ATTENTION_SOURCES).to_numpy() & fp8_kv & fp8_attn
    _attention_quirks(d, rows, decode, fp8_kv & ~fp8_prefill_kernel, fa3)
    _sglang_chunks(rows, (framework == "sglang").to_numpy())
    # SGLang's head_dim 192 rows are MiMo-V2's attention, Q and K 192 wide, V 128 (the collector
    # refuses head_dim 192 without that contract: ai-dynamo/aiconfigurator collector/sglang/
    # collect_attn.py, collector/cases/models/MiMoV2FlashForCausalLM_cases.yaml): no v_head_dim here
    _mark(rows, (framework == "sglang").to_numpy() & (rows["head_dim"] == 192).to_numpy(),
          "unrepresentable: SGLang's head_dim 192 rows are MiMo-V2's attention (V 128 wide, attention "
          "sinks on its windowed layers); mpsim's attention rows have one head_dim for Q, K and V")
    notes = ["attention times include the framework's op scope: " + ", ".join(
        f"{k} {v}" for k, v in SCOPE_BY_FRAMEWORK.items()),
        "decode fp8 (e4m3) KV rows are their own class, priced as 8-bit KV"]
    return Measurements("aiconfigurator attention_perf", frame, _finish(rows), notes)


# kernel sources whose prefill reads an fp8 KV cache that mpsim models: vLLM's FlashInfer rooms,
# FlashAttention-3's fp8 forward (vLLM's FA3 quantizes the query whenever its cache is fp8, though its
# rows say attn_dtype bfloat16; SGLang's `fa3` rows say fp8), SGLang's Triton backend (`triton`) and
# vLLM's (`vllm_triton_attn`: an e4m3 query over an fp8 cache, its rows too saying bfloat16)
FP8_PREFILL_SOURCES = ("vllm_flashinfer_", "vllm_flash_attn_fa3", "fa3", "triton", "vllm_triton_attn")
FP8_ATTENTION_SOURCES = ("vllm_flash_attn_fa3", "fa3", "triton")


def _attention_quirks(d: pd.DataFrame, rows: pd.DataFrame, decode: np.ndarray,
                      fp8_kv: np.ndarray, fa3_fp8: np.ndarray) -> None:
    if "window_size" in d:  # priced by the room of the row's kernel (launch_plan.attention_row)
        rows["window"] = d["window_size"].fillna(0).astype("Int64").to_numpy()
    if "beam_width" in d:
        _mark(rows, d["beam_width"].fillna(1).to_numpy() != 1, "unrepresentable: beam width > 1")
    trtllm_prefill = ~decode & (rows["framework"] == "trtllm").to_numpy()
    _mark(rows, (d["attn_dtype"].astype(str).to_numpy() != "bfloat16") & ~trtllm_prefill & ~fa3_fp8,
          "unrepresentable: FP8 attention compute (attn_dtype fp8) outside TRT-LLM's context FMHA "
          "and FA3's fp8 forward")
    _mark(rows, ~decode & fp8_kv, "unrepresentable: prefill with an fp8 KV cache (modelled for "
          "TRT-LLM's context FMHA, FlashInfer's kernels, FA3 and the Triton backends only)")
    heads, kv_heads = rows["heads"].to_numpy(dtype=np.int64), rows["kv_heads"].to_numpy(dtype=np.int64)
    _mark(rows, (kv_heads < 1) | (heads % np.maximum(kv_heads, 1) != 0),
          "unrepresentable: heads not a multiple of kv_heads")


# SGLang's window_size 8192 rows are Llama 4's chunked local attention, not a sliding window: the
# collector runs that profile with attention_chunk_size 8192 and no sliding window (ai-dynamo/
# aiconfigurator collector/cases/models/Llama4ForConditionalGeneration_cases.yaml:
# sglang_attention_chunk_size 8192, sglang_runtime_window_size -1), and SGLang's FA3 backend runs
# each chunk as a sequence of its own, full attention over the chunk's keys (python/sglang/srt/
# layers/attention/flashattention_backend.py, make_local_attention_virtual_batches)
LLAMA4_CHUNK = 8192


def _sglang_chunks(rows: pd.DataFrame, sglang: np.ndarray) -> None:
    """Rewrite SGLang's chunked rows as the virtual batches its backend runs: a decode reads the keys
    of its last chunk (kv_len mod 8192, or 8192), a prompt of n whole chunks is n sequences of 8192
    (a shorter last chunk would make sequences of unequal lengths: unrepresentable)."""
    if "window" not in rows:
        return
    at = sglang & (rows["window"].fillna(0).to_numpy(dtype=np.int64) == LLAMA4_CHUNK)
    kv = rows["kv_len"].fillna(1).to_numpy(dtype=np.int64)
    decode = at & (rows["q_len"].fillna(1).to_numpy(dtype=np.int64) == 1)
    rows.loc[decode, "kv_len"] = (kv[decode] - 1) % LLAMA4_CHUNK + 1
    split = at & ~decode & (kv > LLAMA4_CHUNK)
    whole = split & (kv % LLAMA4_CHUNK == 0)
    rows.loc[whole, "batch"] = rows["batch"].to_numpy(dtype=np.int64)[whole] * (kv[whole] // LLAMA4_CHUNK)
    rows.loc[whole, "q_len"] = rows.loc[whole, "kv_len"] = LLAMA4_CHUNK
    _mark(rows, split & ~whole, f"unrepresentable: Llama 4's chunked attention over a prompt that is "
          f"not whole {LLAMA4_CHUNK}-token chunks (SGLang's virtual sequences of unequal lengths)")
    rows.loc[at, "window"] = 0


def read_vidur(frame: pd.DataFrame) -> Measurements:
    """One measured row per (input row, op); `vidur_op` names the op."""
    missing = [f"time_stats.{op}.{VIDUR_STAT}" for op in VIDUR_OPS
               if f"time_stats.{op}.{VIDUR_STAT}" not in frame.columns]
    missing += [c for c in VIDUR_SIZES if c not in frame.columns]
    if missing:
        raise MpsimInputError(f"Vidur mlp.csv: missing column(s) {missing}")
    d = frame.reset_index(drop=True)
    for col in VIDUR_SIZES:
        sizes = pd.to_numeric(d[col], errors="coerce").to_numpy(dtype=float)
        bad = ~(sizes >= 1) | (sizes != np.round(sizes))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MpsimInputError(f"Vidur mlp.csv: row {i + 1}, column '{col}': expected a whole number "
                                  f">= 1, got {str(d[col].iloc[i])!r}")
    parts, inputs = [], []
    for op in VIDUR_OPS:
        parts.append(_vidur_op(d, op))
        inputs.append(frame.reset_index(drop=True).assign(vidur_op=op))
    order = np.argsort(np.concatenate([np.arange(len(d)) * len(VIDUR_OPS) + i
                                       for i in range(len(VIDUR_OPS))]), kind="stable")
    rows = pd.concat(parts, ignore_index=True).iloc[order]
    carried = pd.concat(inputs, ignore_index=True).iloc[order].reset_index(drop=True)
    notes = [f"Vidur: statistic '{VIDUR_STAT}' over 20 layers; one row per (token count, op); "
             "GEMMs at the exact Llama shapes are their own class"]
    return Measurements("Vidur mlp.csv", carried, _finish(rows), notes)


def _vidur_op(d: pd.DataFrame, op: str) -> pd.DataFrame:
    tp = d["num_tensor_parallel_workers"].to_numpy(dtype=np.int64)
    hidden, ffn = d["n_embd"].to_numpy(dtype=np.int64), d["n_expanded_embd"].to_numpy(dtype=np.int64)
    heads, kv_heads = d["n_head"].to_numpy(dtype=np.int64), d["n_kv_head"].to_numpy(dtype=np.int64)
    head_dim = hidden // heads
    rows = _blank(len(d))
    rows["measured_us"] = d[f"time_stats.{op}.{VIDUR_STAT}"].to_numpy(dtype=float) * 1e3
    rows["protocol"], rows["tokens"] = "kernel", d["num_tokens"].astype("Int64")
    rows["in_forward"] = True  # Vidur times each op inside the model's forward
    gemm = {"attn_pre_proj": ((heads + 2 * kv_heads) * head_dim // tp, hidden),
            "attn_post_proj": (hidden, heads * head_dim // tp),
            "mlp_up_proj": (2 * ffn // tp, hidden), "mlp_down_proj": (hidden, ffn // tp)}
    if op in gemm:
        rows["op"], rows["cls"], rows["w_format"], rows["w_bits"] = "gemm", "gemm fp16 (Vidur)", "fp16", 16
        rows["m"], (rows["n"], rows["k"]) = rows["tokens"], gemm[op]
        rows["tokens"] = pd.NA
    elif op == "attn_rope":
        rows["op"] = rows["cls"] = "rope"
        rows["heads"], rows["head_dim"] = heads // tp, head_dim
        rows["kv_heads"] = np.maximum(kv_heads // tp, 1)
    elif op == "mlp_act":
        rows["op"] = rows["cls"] = "silu_mul"
        rows["hidden"] = ffn // tp
    else:
        kind = {"emb": "emb", "add": "add"}.get(op, "rmsnorm")
        rows["op"], rows["cls"], rows["hidden"] = kind, kind, hidden
    if op == "emb":
        rows["op"], rows["status"] = "", "unrepresentable: emb (embedding lookup) is not in the op vocabulary"
    return rows
