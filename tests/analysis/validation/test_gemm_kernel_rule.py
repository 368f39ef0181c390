"""Which kernel stands for a measured GEMM row (analysis/validation/adapter.py gemm_kernel) and the
kernel_source / framework / version the aiconfigurator GEMM reader carries."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import (
    UnrepresentableError,
    gemm_kernel,
    launch_rows,
    profiled_m,
)
from mpsim.analysis.validation.sources import read_aic_gemm
from mpsim.hw_models.loader import load_hardware

HW = load_hardware("h200-sxm")
SQ = "trt_flow_/smooth_quant_gemm_L96/PLUGIN_V2_SmoothQuantGemm_0"
PLUGIN = "trt_flow_/weight_only_quant_matmul_L257/PLUGIN_V2_WeightOnlyQuantMatmul_0"


def test_trtllm_weight_only_rows_are_the_plugin_whose_profiler_picks() -> None:
    # the plugin's profiled tactics (the GEMV among them below M = 16) are searched per row
    assert gemm_kernel(4, 4096, "int4-group", 4096, PLUGIN) == "trtllm_fpaintb_gemm"
    assert gemm_kernel(5, 4096, "int8-group", 4096, PLUGIN) == "trtllm_fpaintb_gemm"
    assert gemm_kernel(5, 4096, "int4-group", 0, "") == "trtllm_fpaintb_gemm"
    assert gemm_kernel(5, 4096, "int4-group", 128, "") is None          # group-wise: mpsim's own
    for source in ("torch_flow", "torch.nn.functional.linear", "sglang_torch_linear", ""):
        assert gemm_kernel(64, 4096, "fp16", None, source) == "cublas_gemm"
    with pytest.raises(UnrepresentableError, match="DeepGemm"):
        gemm_kernel(64, 4096, "fp16", None, "DeepGemmFp8BlockScaledMMKernel")
    with pytest.raises(UnrepresentableError, match="SmoothQuant"):
        gemm_kernel(64, 4096, "int8-group", 4096, SQ)


def test_the_plugin_profiles_each_m_below_16_and_powers_of_two_above() -> None:
    assert [profiled_m("trtllm_fpaintb_gemm", m) for m in (1, 12, 15, 16, 48, 384)] == [
        1, 12, 15, 16, 64, 512]
    assert profiled_m("cublas_gemm", 48) == 48


def test_the_searched_plugin_row_is_the_gemv_where_the_model_prices_it_faster() -> None:
    frame = pd.DataFrame({
        "framework": ["TRTLLM"] * 2, "version": ["1.2.0rc5"] * 2, "device": ["NVIDIA H200"] * 2,
        "op_name": ["gemm"] * 2, "kernel_source": [PLUGIN] * 2, "gemm_dtype": ["int8_wo"] * 2,
        "m": [8, 16], "n": [1024] * 2, "k": [8192] * 2, "latency": [0.0127, 0.0284]})
    rows = read_aic_gemm(frame).rows
    kernels = [launch_rows(rows.iloc[i].to_dict(), HW).launches[0]["kernel"] for i in (0, 1)]
    # 8 rows: the GEMV beats the CUTLASS tiles (8 weight tiles of 128, each split over 16 CTAs
    # whose fix-ups run in turn); 16 rows: the GEMV is no longer a tactic
    assert kernels == ["trtllm_wo_gemv", "trtllm_fpaintb_gemm"]


def test_reader_carries_the_kernel_and_the_adapter_routes_by_it() -> None:
    frame = pd.DataFrame({
        "framework": ["TRTLLM"] * 3, "version": ["1.2.0rc5"] * 3, "device": ["NVIDIA H200"] * 3,
        "op_name": ["gemm"] * 3, "kernel_source": [PLUGIN, PLUGIN, "torch_flow"],
        "gemm_dtype": ["int4_wo", "int8_wo", "fp8"], "m": [4, 64, 64], "n": [4096] * 3,
        "k": [4096] * 3, "latency": [0.01, 0.02, 0.02]})
    rows = read_aic_gemm(frame).rows
    assert list(rows["framework"]) == ["trtllm"] * 3 and list(rows["fw_version"]) == ["1.2.0rc5"] * 3
    assert list(rows["kernel_source"]) == [PLUGIN, PLUGIN, "torch_flow"]
    assert list(rows["protocol"]) == ["trt-profiler", "trt-profiler", "graph"]
    assert rows["status"].iloc[2] == "ok" and rows["w_format"].iloc[2] == "fp8"
    launches = [launch_rows(rows.iloc[i].to_dict(), HW, "heuristic").launches[0] for i in (0, 1, 2)]
    assert [x["kernel"] for x in launches] == ["trtllm_wo_gemv", "trtllm_fpaintb_gemm", "trtllm_fp8_gemm"]
    # the profiled rows ran once from idle (the GPU model's boost-clock ramp); the graph row did not
    assert [json.loads(x["config"]).get("one_run") for x in launches] == [1, 1, None]


def test_wo_band_table_and_shape_halves() -> None:
    from mpsim.analysis.validation.wo_bands import band_table, shape_half

    assert list(shape_half(pd.Series([4096, 4096, 2048]), pd.Series([4096, 2048, 4096]))) == [0, 1, 1]
    frame = pd.DataFrame({"status": ["ok"] * 4 + ["skipped"], "m": [1, 8, 100, 1000, 1],
                          "measured_us": [10.0, 10.0, 10.0, 10.0, 10.0],
                          "predicted_us": [11.0, 9.0, 10.0, 12.0, 99.0],
                          "roofline_us": [5.0] * 5, "t_math_us": [1.0] * 5, "t_mem_us": [4.0] * 5})
    t = band_table(frame, pd.Series(["int4_wo"] * 5)).set_index("band")
    assert list(t.loc[["1-4", "5-16", "17-256", "257+"], "sim"]) == [10.0, 10.0, 0.0, 20.0]
    assert t.loc["all", "rows"] == 4 and t.loc["all", "bias"] == 5.0
