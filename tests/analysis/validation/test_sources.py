"""Readers of the published tables, on small samples of the ground truth read in place."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from groundtruth_cases import AIC, VIDUR, needs_groundtruth

from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import (
    read_aic_attention,
    read_aic_gemm,
    read_measurements,
    read_vidur,
)
from mpsim.errors import MpsimInputError

pytestmark = needs_groundtruth


def _sample(path: str, n: int = 40, **match: object) -> pd.DataFrame:
    d = pd.read_parquet(AIC / path)
    for k, v in match.items():
        d = d[d[k] == v]
    return d.iloc[np.linspace(0, len(d) - 1, n).astype(int)]


def test_gemm_dtypes_protocols_and_units() -> None:
    d = pd.concat([_sample("h200_sxm/gemm/trtllm/1.2.0rc5/gemm_perf.parquet", 5, gemm_dtype=t)
                   for t in ("bfloat16", "int4_wo", "int8_wo", "fp8", "sq")])
    m = read_aic_gemm(d)
    r = m.rows
    assert len(r) == len(d) and (r["op"] == "gemm").all()
    assert np.allclose(r["measured_us"], d["latency"].to_numpy() * 1e3)
    bf16, wo4 = r.iloc[:5], r.iloc[5:10]
    assert (bf16["w_format"] == "fp16").all() and (bf16["protocol"] == "graph").all()
    assert (wo4["w_format"] == "int4-group").all() and (wo4["group_size"] == wo4["k"]).all()
    assert (wo4["protocol"] == "trt-profiler").all() and (r.iloc[10:15]["w_bits"] == 8).all()
    fp8 = r.iloc[15:20]  # issue 26: per-tensor W8A8, priced by the kernel the row names
    assert (fp8["w_format"] == "fp8").all() and (fp8["status"] == "ok").all()
    assert fp8["group_size"].isna().all()
    assert r.iloc[20:]["status"].str.startswith("unrepresentable: gemm_dtype sq").all()
    assert set(r["cls"]) == {"gemm bf16", "gemm int4_wo", "gemm int8_wo", "gemm fp8", "gemm sq"}


def test_attention_scope_by_framework_and_quirks() -> None:
    vllm = read_aic_attention(_sample("h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet",
                                      200)).rows
    trt = read_aic_attention(_sample("h100_sxm/attention/trtllm/1.3.0rc20/context_attention_perf.parquet",
                                     200)).rows
    assert (vllm["includes"] == "kv_append").all() and (trt["includes"] == "rope+kv_append").all()
    assert (vllm["q_len"] == 1).all() and (trt["q_len"] == trt["kv_len"]).all()
    assert set(vllm["cls"]) == {"attention decode kv16", "attention decode fp8-kv"}
    assert (vllm.loc[vllm["cls"] == "attention decode fp8-kv", "kv_bits"] == 8).all()
    # a sliding window travels as `window` (the room of the row's kernel decides what it prices)
    src = _sample("h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet", 200)
    assert (vllm["window"].to_numpy() == src["window_size"].to_numpy()).all()
    assert (vllm["window"] > 0).any() and (vllm["status"] == "ok").all()
    # who ran it travels with the row; TRT-LLM's fp8 context FMHA and fp8-KV prefill are priced
    assert set(vllm["framework"]) == {"vllm"} and set(trt["framework"]) == {"trtllm"}
    assert set(trt["kernel_source"]) == {"torch_flow"} and set(trt["fw_version"]) == {"1.3.0rc20"}
    assert {"attention prefill", "attention prefill fp8-kv", "attention prefill fp8"} <= set(trt["cls"])
    assert (trt.loc[trt["attn_dtype"] == "fp8", "status"] == "ok").all()
    vctx = read_aic_attention(_sample("h200_sxm/attention/vllm/0.24.0/context_attention_perf.parquet",
                                      200, kv_cache_dtype="fp8", window_size=0)).rows
    assert (vctx["status"] == "ok").all()  # vLLM's FA3 fp8 forward over its fp8 cache is modelled


def test_trtllm_flashinfer_rows_leave_rope_outside_the_op() -> None:
    """The collector hands TensorRT-LLM's FlashInfer backend no positional embedding (serving runs
    RoPE outside it): those rows' scope is the KV append alone; the torch_flow rows keep RoPE."""
    d = pd.concat([_sample("b200_sxm/attention/trtllm/1.3.0rc20/generation_attention_perf.parquet", 20,
                           kernel_source=s) for s in ("torch_flow_flashinfer", "torch_flow")])
    r = read_aic_attention(d).rows
    assert (r["includes"].iloc[:20] == "kv_append").all()
    assert (r["includes"].iloc[20:] == "rope+kv_append").all()


def test_sglang_head_dim_192_rows_are_mimo_v2s_unequal_widths() -> None:
    """SGLang's head_dim 192 rows are MiMo-V2's attention (V 128 wide): no single head_dim prices
    them, so they are unrepresentable with that reason; other head dims stay priced."""
    d = pd.concat([_sample("h200_sxm/attention/sglang/0.5.14/generation_attention_perf.parquet", 10,
                           head_dim=h, kernel_source="fa3") for h in (192, 128)])
    r = read_aic_attention(d).rows
    assert r["status"].iloc[:10].str.contains("MiMo-V2").all()
    assert (r["status"].iloc[10:] == "ok").all()


def _first(d: pd.DataFrame, **match: object) -> pd.DataFrame:
    return d[np.logical_and.reduce([d[k] == v for k, v in match.items()])].iloc[:1]


def test_sglang_window_8192_rows_are_llama4_chunks_as_virtual_batches() -> None:
    """SGLang's window_size 8192 rows are Llama 4's chunked attention: a decode reads its last
    chunk's keys, a prompt of whole chunks runs as that many sequences of 8192, a prompt ending in a
    partial chunk is unrepresentable; TRT-LLM's window 8192 rows stay a sliding window."""
    base = "h200_sxm/attention/sglang/0.5.14/"
    gen = pd.read_parquet(AIC / base / "generation_attention_perf.parquet")
    ctx = pd.read_parquet(AIC / base / "context_attention_perf.parquet")
    d = pd.concat([_first(gen, window_size=8192, step=s, batch_size=1) for s in (4095, 8191, 16383)]
                  + [_first(ctx, window_size=8192, isl=s, batch_size=2) for s in (4096, 16384, 12288)])
    r = read_aic_attention(d).rows
    assert r["kv_len"].tolist() == [4096, 8192, 8192, 4096, 8192, 12288]
    assert r["batch"].tolist() == [1, 1, 1, 2, 4, 2] and (r["window"] == 0).all()
    assert (r["q_len"].iloc[3:5] == r["kv_len"].iloc[3:5]).all()
    assert (r["status"].iloc[:5] == "ok").all() and "chunked" in r["status"].iloc[5]
    trt = _sample("h200_sxm/attention/trtllm/1.3.0rc20/generation_attention_perf.parquet", 5,
                  window_size=8192)
    t = read_aic_attention(trt).rows
    assert (t["window"] == 8192).all() and (t["kv_len"].to_numpy() == trt["step"].to_numpy() + 1).all()


def test_generation_kv_len_counts_the_new_token() -> None:
    d = _sample("h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet", 20)
    r = read_aic_attention(d).rows
    assert (r["kv_len"].to_numpy() == d["step"].to_numpy() + 1).all()


def test_vidur_one_row_per_token_count_and_op() -> None:
    path = VIDUR / "h100/meta-llama/Llama-2-7b-hf/mlp.csv"
    d = pd.read_csv(path)
    d = d[d["num_tokens"].isin([1, 512])]
    m = read_vidur(d)
    assert len(m.rows) == 10 * len(d) and list(m.input.columns)[-1] == "vidur_op"
    first = m.rows.iloc[:10]
    assert list(m.input["vidur_op"].iloc[:10]) == ["emb", "input_layernorm", "attn_pre_proj",
                                                   "attn_rope", "attn_post_proj",
                                                   "post_attention_layernorm", "mlp_up_proj",
                                                   "mlp_act", "mlp_down_proj", "add"]
    assert first["status"].iloc[0].startswith("unrepresentable: emb")
    assert (first["protocol"] == "kernel").all()
    gemms = m.rows[(m.rows["op"] == "gemm") & (m.input["num_tensor_parallel_workers"] == 1).to_numpy()]
    assert {(int(n), int(k)) for n, k in zip(gemms["n"], gemms["k"], strict=True)} == {
        (12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)}
    tp2 = m.rows[(m.input["num_tensor_parallel_workers"] == 2).to_numpy() & (m.rows["op"] == "silu_mul")]
    assert (tp2["hidden"] == 5504).all()
    kept = apply_selection(m, "issue11").rows
    assert set(kept.loc[(m.input["num_tensor_parallel_workers"] != 1).to_numpy(), "status"]) == {
        "skipped: outside selection issue11"}


def test_files_are_recognised_by_their_columns(tmp_path: object) -> None:
    m = read_measurements(VIDUR / "h100/meta-llama/Llama-2-70b-hf/mlp.csv")
    assert m.source == "Vidur mlp.csv"
    with pytest.raises(MpsimInputError, match="no such measurement file"):
        read_measurements(AIC / "nope.parquet")
