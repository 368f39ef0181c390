"""The time of a launch in named parts (docs/simulator.md#time-parts): the `part_*_s` columns add up
to `time_s` for every kernel family under every model, land where the launch's bottleneck is, survive
the on-disk memo, and reach `mpsim simulate --out` and `mpsim op`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mpsim import library
from mpsim.cli import main
from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import LOOP_STAGES_KEY
from mpsim.launch_plan import attention_row, framework_op_row, gemm_row
from mpsim.library.cublas import CUBLAS_GEMM
from mpsim.library.cutlass_fp8 import cutlass_fp8_sm89_heuristic
from mpsim.library.torch import TORCH_ADD
from mpsim.library.trtllm import TRTLLM_WO_GEMV
from mpsim.library.trtllm_fp8 import fp8_sm89_heuristic
from mpsim.library.vllm import VLLM_RMS_NORM, VLLM_ROPE, VLLM_SILU_MUL
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.launch import price_launch
from mpsim.sim.result import PART_COLUMNS, PARTS
from mpsim.synth import synthesize
from mpsim.traces.io import write_trace
from mpsim.traces.trace import rows_to_frame
from mpsim.workload import Workload

EXTERNAL_ROWS = [
    gemm_row(64, 4096, 4096, kernel=CUBLAS_GEMM),
    gemm_row(4, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_WO_GEMV),
    attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="fa3", kv_append=True, l2_warm=True),
    attention_row(4, 1, 2048, 32, 8, 128, kernel="fa3"),
    attention_row(2, 1024, 1024, 32, 8, 128, kernel="fa3", kv_append=True),
    framework_op_row(VLLM_RMS_NORM, 512, 4096),
    framework_op_row(VLLM_SILU_MUL, 512, 11008),
    framework_op_row(VLLM_ROPE, 512, 4096, heads=32, kv_heads=32, head_dim=128),
    framework_op_row(TORCH_ADD, 512, 4096, l2_warm=True),
    gemm_row(64, 4096, 4096, "group", 4, 4096, kernel="trtllm_fpaintb_gemm"),
    gemm_row(16, 4096, 4096, "group", 4, 128, kernel="marlin_gemm"),
    gemm_row(16, 4096, 4096, "group", 4, 128, kernel="machete_gemm"),
    gemm_row(16, 4096, 4096, "group", 4, 128, kernel="turbomind_gemm"),
    gemm_row(1, 4096, 4096, "group", 4, 64, kernel="gemlite_gemv_revsplitk"),   # + its zero fill
    gemm_row(32, 4096, 4096, "group", 4, 64, kernel="gemlite_gemm_splitk"),
    gemm_row(128, 4096, 4096, "group", 4, 64, kernel="gemlite_gemm"),
    attention_row(64, 1, 4096, 32, 8, 128, 8, kernel="trtllm"),     # XQA (fp8 KV)
    attention_row(1, 1, 128, 32, 32, 128, kernel="trtllm"),         # MMHA (heads == kv_heads)
    attention_row(2, 512, 512, 32, 8, 128, kernel="trtllm"),        # the context FMHA
    attention_row(4, 1, 2048, 32, 8, 128, kernel="sglang"),
    attention_row(2, 512, 512, 32, 8, 128, kernel="sglang"),
    gemm_row(16, 4096, 4096, "fp8", 8, kernel="cutlass_fp8_gemm"),
    gemm_row(256, 4096, 4096, "fp8-block", 8, kernel="cutlass_fp8_block_gemm"),
    gemm_row(64, 4096, 4096, "fp8-block", 8, kernel="deepgemm_fp8_block_gemm"),
    gemm_row(8, 4096, 4096, "fp8-block", 8, kernel="flashinfer_fp8_block_gemm"),
    gemm_row(512, 4096, 4096, "fp8", 8, kernel="trtllm_fp8_gemm"),
    *(framework_op_row(k, 512, 4096) for k in ("fp8_act_quant", "fp8_block_act_quant", "nvfp4_act_quant")),
    framework_op_row("trtllm_awq_prescale", 512, 4096),
    attention_row(8, 1, 4096, 32, 8, 128, kernel="fa2", kv_append=True, l2_warm=True),
    attention_row(2, 512, 512, 32, 8, 128, kernel="fa2", kv_append=True, l2_warm=True),
    attention_row(1, 1, 8192, 32, 8, 128, 8, kernel="flashinfer_attention", kv_append=True),
    attention_row(2, 512, 512, 32, 8, 128, 8, kernel="flashinfer_attention", l2_warm=True),
    attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="flashinfer_trtllm", l2_warm=True),
    attention_row(2, 512, 512, 32, 8, 128, 8, kernel="flashinfer_trtllm", kv_append=True),
    attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="trtllm_sm100", l2_warm=True),
    attention_row(2, 512, 512, 32, 8, 128, 8, kernel="trtllm_sm100"),
    attention_row(8, 1, 4096, 16, 2, 512, 8, kernel="sglang_triton", l2_warm=True),
    attention_row(2, 512, 512, 16, 8, 256, 8, kernel="sglang_triton", window=128),
    attention_row(8, 1, 4096, 64, 4, 192, 8, kernel="vllm_triton", kv_append=True, l2_warm=True),
    attention_row(256, 1, 512, 8, 1, 192, 8, kernel="vllm_triton", kv_append=True, l2_warm=True),
    attention_row(2, 512, 512, 64, 4, 192, 8, kernel="vllm_triton", kv_append=True, window=128),
]
# FP4 GEMMs run on Blackwell only (no fp4 tensor cores on the H100/H200 and the NPUs of the tests
# above): their parts are checked on b200-sxm below
FP4_ROWS = [gemm_row(16, 4096, 4096, "nvfp4", 4, kernel="flashinfer_nvfp4_gemm"),
            gemm_row(1024, 4096, 4096, "nvfp4", 4, kernel="trtllm_nvfp4_gemm")]
# Ada's fp8 kernels (sm_89: vLLM's Triton block kernel, TensorRT-LLM's blockwise kernel, the c2x /
# cuBLASLt forms of the per-tensor ones) run on the L40S: their parts are checked there below
ADA_ROWS = [gemm_row(64, 4096, 4096, "fp8-block", 8, kernel="triton_fp8_block_gemm"),
            gemm_row(64, 4096, 4096, "fp8-block", 8, kernel="trtllm_fp8_block_gemm"),
            gemm_row(16, 4096, 4096, "fp8", 8, kernel="cutlass_fp8_gemm",
                     config=cutlass_fp8_sm89_heuristic(16, 4096, 4096)),
            gemm_row(1, 4096, 4096, "fp8", 8, kernel="trtllm_fp8_gemm",
                     config=fp8_sm89_heuristic(1, 4096, 4096, 142)),
            attention_row(2, 512, 512, 32, 8, 128, kernel="trtllm_sm89"),
            attention_row(2, 512, 512, 32, 8, 128, 8, kernel="trtllm_sm89", fp8_attention=True),
            attention_row(1, 1, 4096, 32, 8, 128, 8, kernel="trtllm_sm89", l2_warm=True)]
TOL = 1e-12


def _frames() -> list[pd.DataFrame]:
    """mpsim's kernels (every family a tiny model synthesizes under three policies) and the others."""
    wl = Workload(32, 3, 2)
    own = [synthesize(get_model("tiny"), parse_policy(p), wl).rows for p in ("ap4-3+kv8", "w4+kv4", "fp16")]
    return [*own, rows_to_frame(EXTERNAL_ROWS)]


def _check_sum(parts: pd.DataFrame, time_s: pd.Series) -> None:
    assert (parts >= 0).all().all()
    error = (parts.sum(axis=1) - time_s).abs() / time_s
    assert error.max() <= TOL, error.max()


@pytest.mark.parametrize("model", ["sim", "roofline"])
@pytest.mark.parametrize("hw_name", ["h200-sxm", "npu-llm"])
def test_parts_add_up_to_the_time_for_every_kernel_family(hw_name: str, model: str) -> None:
    hw, kernels = load_hardware(hw_name), set()
    for rows in _frames():
        res = simulate(rows, hw, model, cache_dir=None).launches
        assert list(res.columns[-len(PARTS):]) == list(PART_COLUMNS)
        _check_sum(res[list(PART_COLUMNS)], res["time_s"])
        kernels |= set(rows["kernel"])
    fp4 = {str(r["kernel"]) for r in FP4_ROWS}
    ada = {"triton_fp8_block_gemm", "trtllm_fp8_block_gemm", "trtllm_sm89_context_fmha"}  # on l40s below
    assert set(library.EXTERNAL_KERNELS) - fp4 - ada <= kernels and {"kv_quant_kernel", "gemv_group_kernel",
                                                    "gemm_anyprec_kernel", "rms_norm_kernel"} <= kernels


@pytest.mark.parametrize("row", EXTERNAL_ROWS, ids=lambda r: str(r["kernel"]))
def test_one_launch_priced_alone_has_parts_that_add_up(row: dict[str, Any]) -> None:
    out = price_launch(row, load_hardware("h100-sxm"))
    total = sum(out[c] for c in PART_COLUMNS)
    assert min(out[c] for c in PART_COLUMNS) >= 0
    assert abs(total - out["time_s"]) <= TOL * out["time_s"]
    assert out["part_launch_s"] == out["overhead_s"] > 0


@pytest.mark.parametrize("row", FP4_ROWS, ids=lambda r: str(r["kernel"]))
def test_an_fp4_launch_on_blackwell_has_parts_that_add_up(row: dict[str, Any]) -> None:
    out = price_launch(row, load_hardware("b200-sxm"))
    assert min(out[c] for c in PART_COLUMNS) >= 0
    assert abs(sum(out[c] for c in PART_COLUMNS) - out["time_s"]) <= TOL * out["time_s"]


@pytest.mark.parametrize("row", ADA_ROWS, ids=lambda r: str(r["kernel"]))
def test_an_ada_fp8_launch_on_the_l40s_has_parts_that_add_up(row: dict[str, Any]) -> None:
    out = price_launch(row, load_hardware("l40s"))
    assert min(out[c] for c in PART_COLUMNS) >= 0
    assert abs(sum(out[c] for c in PART_COLUMNS) - out["time_s"]) <= TOL * out["time_s"]


def _shares(row: dict[str, Any], hw_name: str = "h200-sxm") -> dict[str, float]:
    out = price_launch(row, load_hardware(hw_name))
    return {p: out[f"part_{p}_s"] / out["time_s"] for p in PARTS}


def _plain_loop(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its one-row K loop unpipelined (no loop_stages: the loop the 2026-12-04 H200
    captures ran)."""
    cfg = json.loads(row["config"])
    cfg.pop(LOOP_STAGES_KEY)
    return {**row, "config": json.dumps(cfg, sort_keys=True)}


def test_a_memory_bound_gemv_is_mostly_memory() -> None:
    """The 16-row GEMV (tl.dot, pipelined) streams: memory; so does the one-row GEMV with its K loop
    pipelined (loop_stages). Unpipelined, the one-row GEMV's trips are lock-step: its wave's bytes
    (memory) and each trip's round trip (latency), the round trip the larger part on the H200, as
    its capture measured (docs/validation.md)."""
    for m in (16, 1):
        shares = _shares(gemm_row(m, 8192, 8192))
        assert shares["memory"] > 0.85 and max(shares, key=lambda p: shares[p]) == "memory"
    one_row = _shares(_plain_loop(gemm_row(1, 8192, 8192)))
    assert one_row["memory"] + one_row["latency"] > 0.95 and one_row["latency"] > one_row["memory"] > 0.3


def test_a_large_gemm_on_tensor_cores_is_mostly_math() -> None:
    shares = _shares(gemm_row(8192, 8192, 8192, kernel=CUBLAS_GEMM))
    assert shares["math"] > 0.9 and shares["memory"] == 0.0


def test_an_int4_weight_only_gemv_shows_its_dequantization() -> None:
    """TRT-LLM's wo GEMV at its largest batch, and mpsim's group GEMV on b200-sxm: CUDA-core work
    (dequantize, FMA) outlasts the weight stream, so it is the issue part, not memory. On h200-sxm
    mpsim's one-row int4 GEMV, pipelined, issues under its bytes' time (3.78 slots a weight against
    H200's budget of about 3.7, B200's 8 TB/s ask for less): memory. Unpipelined (no loop_stages),
    its trips' round trips dominate (measured on the H200: ~1.8 us a trip)."""
    trt = _shares(gemm_row(4, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_WO_GEMV))
    assert trt["issue"] > 0.3 and trt["memory"] == 0.0
    row = gemm_row(1, 14336, 4096, "group", 4)
    own = _shares(row, "b200-sxm")
    assert own["issue"] > 0.5 and own["memory"] == 0.0 and own["issue"] > own["latency"]
    on_h200 = _shares(row)
    assert on_h200["issue"] == 0.0 and on_h200["memory"] > 0.5 > on_h200["latency"]
    # each unpipelined trip: its round trip (latency), then its dequantization (issue) on B200
    # (issue 0.21 of the time with the 910 ns round trip)
    own = _shares(_plain_loop(row), "b200-sxm")
    assert own["issue"] > 0.15 and own["memory"] == 0.0 and own["latency"] > own["issue"]
    on_h200 = _shares(_plain_loop(row))
    assert on_h200["issue"] == 0.0 and on_h200["latency"] > on_h200["memory"] > 0.15


def test_a_tiny_launch_is_mostly_fixed_costs_and_launch() -> None:
    shares = _shares(gemm_row(1, 64, 64))  # one trip: its round trip, the kernel floor, the launch
    assert shares["fixed"] + shares["launch"] > 0.6 and shares["memory"] < 0.05
    assert shares["fixed"] + shares["launch"] + shares["latency"] > 0.95


def test_the_npu_parts_follow_its_units() -> None:
    hw = load_hardware("npu-llm")
    res = simulate(rows_to_frame([gemm_row(1, 8192, 8192), gemm_row(4096, 4096, 4096)]), hw,
                   cache_dir=None).launches
    shares = res[list(PART_COLUMNS)].div(res["time_s"], axis=0)
    assert shares["part_memory_s"].iloc[0] > 0.8 and shares["part_math_s"].iloc[1] > 0.8
    assert (res["part_launch_s"] == res["overhead_s"]).all()
    # one step: a 6 ns share (a norm hidden under the dispatch) after a long launch, a difference
    # of large ends, its parts counted in the step's cycles: capped at the share, they still add up
    rows = [attention_row(1, 2048, 2048, 32, 32, 128), framework_op_row(VLLM_RMS_NORM, 1, 4096),
            framework_op_row(VLLM_SILU_MUL, 512, 11008)]
    res = simulate(rows_to_frame(rows), hw, cache_dir=None).launches
    assert res["time_s"].iloc[1] < 1e-8
    _check_sum(res[list(PART_COLUMNS)], res["time_s"])


def test_parts_come_back_from_the_disk_memo(tmp_path: Path) -> None:
    rows = rows_to_frame(EXTERNAL_ROWS[:3])
    hw = load_hardware("h200-sxm")
    first = simulate(rows, hw, cache_dir=tmp_path)
    again = simulate(rows, hw, cache_dir=tmp_path)
    assert again.stats["simulated"] == 0 and again.stats["memo_hits"] == len(rows)
    for c in PART_COLUMNS:
        assert again.launches[c].tolist() == first.launches[c].tolist()


def test_simulate_out_has_the_part_columns(tmp_path: Path) -> None:
    trace = synthesize(get_model("tiny"), parse_policy("w4+kv4"), Workload(16, 2, 1))
    path, out = tmp_path / "t.parquet", tmp_path / "out.parquet"
    write_trace(trace, path)
    assert main(["simulate", str(path), "--hw", "h200-sxm", "--out", str(out), "--no-cache"]) == 0
    table = pd.read_parquet(out)
    assert list(table.columns[-len(PARTS):]) == list(PART_COLUMNS)
    _check_sum(table[list(PART_COLUMNS)], table["time_s"])


@pytest.mark.parametrize(("fmt", "bits", "kernel", "hw"), [
    ("fp8", "8", "cutlass_fp8_gemm", "h200-sxm"), ("fp8-block", "8", "deepgemm_fp8_block_gemm", "h100-sxm"),
    ("nvfp4", "4", "flashinfer_nvfp4_gemm", "b200-sxm")])
def test_op_prints_an_fp8_or_fp4_gemm_and_its_parts(fmt: str, bits: str, kernel: str, hw: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--w-format", fmt,
                 "--bits", bits, "--kernel", kernel, "--hw", hw]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{kernel} on {hw}")
    total = float(re.search(r"time\s+([\d.]+) us", text).group(1))  # type: ignore[union-attr]
    lines = re.findall(r"^    (\w+)\s+([\d.]+) us\s+([\d.]+)%", text, re.MULTILINE)
    assert [name for name, _, _ in lines] == list(PARTS)
    assert sum(float(us) for _, us, _ in lines) == pytest.approx(total, abs=0.01)


def test_op_prints_one_line_per_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "gemm", "--m", "4", "--n", "4096", "--k", "4096", "--w-format", "group",
                 "--bits", "4", "--group", "4096", "--kernel", "trtllm_wo_gemv", "--hw", "h200-sxm"]) == 0
    text = capsys.readouterr().out
    total = float(re.search(r"time\s+([\d.]+) us", text).group(1))  # type: ignore[union-attr]
    lines = re.findall(r"^    (\w+)\s+([\d.]+) us\s+([\d.]+)%", text, re.MULTILINE)
    assert [name for name, _, _ in lines] == list(PARTS)
    assert sum(float(us) for _, us, _ in lines) == pytest.approx(total, abs=0.01)
    assert sum(float(pct) for _, _, pct in lines) == pytest.approx(100.0, abs=0.5)
    assert float(dict((n, p) for n, _, p in lines)["issue"]) > 30
