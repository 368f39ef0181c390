"""fp8 / fp8_block / nvfp4 GEMM rows in `validate --against` (analysis/validation/fp8_rows.py): the
reader's formats and protocols, the kernel each (framework, kernel_source) routes to with the call's
activation quantization, the collectors' weight copies, vLLM's eager host path, and (with
../shared) the published H200 rows within the issue's bar."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import UnrepresentableError, launch_rows
from mpsim.analysis.validation.eager_host import HOST_US, host_floor_us
from mpsim.analysis.validation.fp8_rows import SCALED_KERNELS, weight_copies
from mpsim.analysis.validation.sources import read_aic_gemm
from mpsim.hw_models.loader import load_hardware
from mpsim.library.scaled_gemm import QUANT_GROUP, QUANT_GROUP_TRITON, QUANT_GROUP_VLLM

H200, B200, L40S = (load_hardware(n) for n in ("h200-sxm", "b200-sxm", "l40s"))


def _frame(framework: str, sources: list[str], dtypes: list[str], ms: list[int], n: int = 4096,
           k: int = 4096) -> pd.DataFrame:
    count = len(sources)
    version = {"VLLM": "0.24.0", "TRTLLM": "1.3.0rc20", "SGLANG": "0.5.14"}[framework]
    return pd.DataFrame({"framework": [framework] * count, "version": [version] * count,
                         "device": ["NVIDIA"] * count, "op_name": ["gemm"] * count,
                         "kernel_source": sources, "gemm_dtype": dtypes, "m": ms, "n": [n] * count,
                         "k": [k] * count, "latency": [0.05] * count})


def test_reader_maps_the_dtypes_and_vllms_eager_block_rows() -> None:
    rows = read_aic_gemm(_frame("VLLM", ["CutlassFP8ScaledMMLinearKernel", "DeepGemmFp8BlockScaledMMKernel",
                                         "FlashInferCuteDslNvFp4LinearKernel", "x"],
                                ["fp8", "fp8_block", "nvfp4", "sq"], [8, 64, 8, 8])).rows
    assert list(rows["w_format"][:3]) == ["fp8", "fp8-block", "nvfp4"]
    assert list(rows["w_bits"][:3]) == [8, 8, 4]
    assert rows["group_size"].iloc[0] is pd.NA and list(rows["group_size"][1:3]) == [128, 16]
    assert list(rows["cls"]) == ["gemm fp8", "gemm fp8_block", "gemm nvfp4", "gemm sq"]
    assert list(rows["protocol"]) == ["graph", "eager", "graph", "graph"]
    assert list(rows["status"][:3]) == ["ok"] * 3 and rows["status"].iloc[3].startswith("unrepresentable")
    trt = read_aic_gemm(_frame("TRTLLM", ["torch_flow"], ["fp8_block"], [64])).rows
    assert list(trt["protocol"]) == ["graph"]  # TRT-LLM's collector times fp8_block in a graph


@pytest.mark.parametrize(("key", "target"), list(SCALED_KERNELS.items()), ids=lambda v: "-".join(map(str, v)))
def test_each_kernel_source_routes_to_its_kernel_and_quantization(key: tuple[str, str, str],
                                                                  target: tuple[str, int]) -> None:
    framework, source, fmt = key
    dtype = {"fp8": "fp8", "fp8-block": "fp8_block", "nvfp4": "nvfp4"}[fmt]
    m = 8 if source.startswith("FlashInferFp8") else 64
    hw = B200 if fmt == "nvfp4" else (L40S if source.startswith("Triton") else H200)
    row = read_aic_gemm(_frame(framework.upper(), [source], [dtype], [m])).rows.iloc[0].to_dict()
    launch = launch_rows(row, hw, "best").launches[0]
    config = launch["config"] if isinstance(launch["config"], dict) else json.loads(launch["config"])
    assert (launch["kernel"], config["quant"]) == target
    assert launch["w_format"] == fmt


def test_kernels_and_devices_not_modelled_are_unrepresentable() -> None:
    triton = read_aic_gemm(_frame("VLLM", ["TritonFp8BlockScaledMMKernel"], ["fp8_block"], [64])).rows
    assert launch_rows(triton.iloc[0].to_dict(), L40S).launches[0]["kernel"] == "triton_fp8_block_gemm"
    with pytest.raises(UnrepresentableError, match="TritonFp8BlockScaledMMKernel"):  # Hopper: DeepGEMM's
        launch_rows(triton.iloc[0].to_dict(), H200)
    block = read_aic_gemm(_frame("TRTLLM", ["torch_flow"], ["fp8_block"], [64])).rows
    # TensorRT-LLM's op runs its own blockwise kernel on Ada, its vendored DeepGEMM on Hopper (the
    # same kernel name, the config by SM version), DeepGEMM's current kernel on Blackwell
    ada, hopper = (launch_rows(block.iloc[0].to_dict(), hw).launches[0] for hw in (L40S, H200))
    assert ada["kernel"] == hopper["kernel"] == "trtllm_fp8_block_gemm"
    assert json.loads(ada["config"])["sm"] == 89 and "sm" not in json.loads(hopper["config"])
    blackwell = read_aic_gemm(_frame("TRTLLM", ["deepgemm"], ["fp8_block"], [64])).rows
    launch = launch_rows(blackwell.iloc[0].to_dict(), B200).launches[0]
    assert launch["kernel"] == "deepgemm_fp8_block_gemm"
    assert json.loads(launch["config"])["quant"] == QUANT_GROUP_TRITON
    deepgemm = read_aic_gemm(_frame("VLLM", ["DeepGemmFp8BlockScaledMMKernel"], ["fp8_block"], [64])).rows
    with pytest.raises(UnrepresentableError, match="sm_89"):  # no DeepGEMM on Ada
        launch_rows(deepgemm.iloc[0].to_dict(), L40S)
    nvfp4 = read_aic_gemm(_frame("VLLM", ["FlashInferCuteDslNvFp4LinearKernel"], ["nvfp4"], [8])).rows
    with pytest.raises(UnrepresentableError, match="h200-sxm has no fp4 tensor cores"):
        launch_rows(nvfp4.iloc[0].to_dict(), H200)


def test_vllms_group_quantizer_on_hopper_and_ada_and_the_packed_one_on_blackwell() -> None:
    """vLLM's block-fp8 calls quantize with its per_token_group_quant kernel (QUANT_GROUP_VLLM) on
    Hopper and Ada; on SM100 its DeepGEMM path takes UE8M0 scales from another, packed kernel,
    priced as the generic group quantizer."""
    def quant(source: str, hw: object) -> int:
        row = read_aic_gemm(_frame("VLLM", [source], ["fp8_block"], [64])).rows.iloc[0].to_dict()
        return int(json.loads(launch_rows(row, hw).launches[0]["config"])["quant"])

    assert quant("DeepGemmFp8BlockScaledMMKernel", H200) == QUANT_GROUP_VLLM
    assert quant("TritonFp8BlockScaledMMKernel", L40S) == QUANT_GROUP_VLLM
    assert quant("DeepGemmFp8BlockScaledMMKernel", B200) == QUANT_GROUP


def test_weight_copies_follow_the_collectors_by_version() -> None:
    def row(framework: str, fmt: str, n: int, k: int, version: str = "1.3.0rc20") -> dict[str, object]:
        group = {"fp8": pd.NA, "fp8-block": 128, "nvfp4": 16}[fmt]
        return {"framework": framework, "fw_version": {"vllm": "0.24.0", "sglang": "0.5.14"}.get(
                    framework, version), "w_format": fmt, "w_bits": 4 if fmt == "nvfp4" else 8,
                "group_size": group, "m": 1, "n": n, "k": k}

    l2 = H200.l2.size_MiB * 2**20
    assert weight_copies(row("vllm", "fp8", 4096, 4096), H200) == 6
    assert weight_copies(row("vllm", "fp8-block", 4096, 4096), H200) == 1
    assert weight_copies(row("sglang", "fp8", 4096, 4096), H200) == 6
    assert weight_copies(row("trtllm", "fp8", 4096, 4096), H200) == int(np.ceil(l2 / 4096**2))
    assert weight_copies(row("trtllm", "fp8", 16384, 16384), H200) == 1
    assert weight_copies(row("trtllm", "fp8", 512, 512), H200) == 5
    assert weight_copies(row("trtllm", "fp8", 16384, 16384, "1.0.0"), L40S) == 5  # before 1.3: always 5


def test_a_measured_call_carries_its_weight_copies_on_ada_and_hopper() -> None:
    # vLLM: 6 everywhere; TensorRT-LLM 1.3: min(5, ceil(L2 / 16.8 MB)), 4 on H200, 5 on L40S
    for framework, source, copies in (("VLLM", "CutlassFP8ScaledMMLinearKernel", (6, 6)),
                                      ("TRTLLM", "torch_flow", (4, 5))):
        row = read_aic_gemm(_frame(framework, [source], ["fp8"], [16])).rows.iloc[0].to_dict()
        for hw, expect in zip((H200, L40S), copies, strict=True):
            launch = launch_rows(row, hw, "best").launches[0]
            config = json.loads(launch["config"]) if isinstance(launch["config"], str) else launch["config"]
            assert config["w_copies"] == expect == weight_copies(row, hw)
            assert config.get("sm") == (89 if hw is L40S else None)


def test_eager_rows_take_the_longer_of_host_and_gpu() -> None:
    rows = read_aic_gemm(_frame("VLLM", ["DeepGemmFp8BlockScaledMMKernel", "CutlassFP8ScaledMMLinearKernel"],
                                ["fp8_block", "fp8"], [64, 64])).rows
    host = host_floor_us(rows, "h200-sxm")
    assert host[0] == HOST_US[("hopper", "vllm", "DeepGemmFp8BlockScaledMMKernel")] and np.isnan(host[1])
    # the host is the collector's machine: H100 shares H200's, B200's tables were timed on another
    assert host_floor_us(rows, "h100-sxm")[0] == 88.4
    assert host_floor_us(rows, "b200-sxm")[0] == HOST_US[("b200", "vllm", "DeepGemmFp8BlockScaledMMKernel")]
    assert np.isnan(host_floor_us(rows, "l40s")).all()  # no host time for these paths there
    triton = read_aic_gemm(_frame("VLLM", ["TritonFp8BlockScaledMMKernel"], ["fp8_block"], [64])).rows
    assert host_floor_us(triton, "l40s")[0] == HOST_US[("l40s", "vllm", "TritonFp8BlockScaledMMKernel")]
    assert np.isnan(host_floor_us(rows, "a100-sxm-80gb")).all()  # no known host: the eager protocol's cost


GROUNDTRUTH = Path(__file__).resolve().parents[3] / ".." / "shared" / "groundtruth" / "aiconfigurator"


@pytest.mark.skipif(not GROUNDTRUTH.is_dir(), reason="../shared/groundtruth is not here")
def test_h200_trtllm_fp8_rows_within_the_bar_and_beating_the_roofline() -> None:
    from mpsim.analysis.validation.against import validate_against
    from mpsim.analysis.validation.sources import read_measurements

    m = read_measurements(GROUNDTRUTH / "h200_sxm" / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet")
    r = validate_against(m, H200, selection="fp8", sample=60, cache_dir=None)
    f = r.frame[(r.frame["status"] == "ok") & (r.frame["cls"] == "gemm fp8")]
    assert len(f) >= 20
    sim = float((f["predicted_us"] / f["measured_us"] - 1).abs().mean())
    roof = float((f["roofline_us"] / f["measured_us"] - 1).abs().mean())
    assert sim <= 0.10 and sim < roof, (sim, roof)
