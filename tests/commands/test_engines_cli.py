"""`--engine` on the commands (docs/engines.md): synth + simulate, serve, a sweep with an engine axis,
op, plot; `mpsim engines`; a policy an engine cannot run and a trace of another engine are one clear
error each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from bad_input_cases import clear_error

from mpsim.cli import main
from mpsim.traces.io import read_trace

SYNTH = ["synth", "--model", "tiny", "--prompt-len", "16", "--gen-len", "4"]
UNSUPPORTED = ("engine 'trtllm' cannot run policy 'ap3': it has no any-precision weights; trtllm runs "
               "weights fp16, int8-group (groups row), int4-group (groups row, 64, 128), "
               "fp8 (scales tensor), fp8-block, nvfp4; KV cache kv16, kv8, kv8f; engines that run it: mpsim")


def _synth(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / f"{name}.parquet"
    assert main([*SYNTH, "--out", str(out), *extra]) == 0
    return out


def _simulate(trace: Path, tmp_path: Path, *extra: str) -> pd.DataFrame:
    out = tmp_path / f"{trace.stem}-sim.parquet"
    assert main(["simulate", str(trace), "--hw", "h200-sxm", "--no-cache", "--out", str(out), *extra]) == 0
    return pd.read_parquet(out)


def test_synth_trtllm_w4_then_simulate_prices_the_engines_kernels(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trt = _synth(tmp_path, "trt", "--policy", "w4", "--engine", "trtllm")
    assert "trtllm's kernels on hopper" in capsys.readouterr().out
    assert read_trace(trt).meta.engine == "trtllm"
    own = _simulate(_synth(tmp_path, "own", "--policy", "w4"), tmp_path)
    got = _simulate(trt, tmp_path)
    assert "trtllm's kernels" in capsys.readouterr().out
    decode_gemms = got[(got["op"] == "gemm") & (got["phase"] == "decode") & (got["module"] != "lm_head")]
    assert set(decode_gemms["kernel"]) == {"trtllm_wo_gemv"}  # batch 1: TensorRT-LLM's batched GEMV
    assert {"cublas_gemm", "trtllm_context_fmha", "vllm_rms_norm"} <= set(got["kernel"])
    total, mpsim_total = got["time_s"].sum(), own["time_s"].sum()
    assert math.isfinite(total) and total > 0 and total != mpsim_total
    # the same launches, other kernels, less RoPE and the KV append (inside TRT-LLM's attention op)
    assert len(got) == len(own) - own["op"].isin(["rope", "kv_quant"]).sum()


def test_simulate_never_reprices_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trt = _synth(tmp_path, "trt", "--policy", "w4", "--engine", "trtllm")
    clear_error(["simulate", str(trt), "--hw", "h200-sxm", "--engine", "vllm"], capsys,
                "holds the kernels of engine 'trtllm'", "add --reprice")
    clear_error(["simulate", str(trt), "--hw", "h200-sxm", "--reprice"], capsys, "name it with --engine")
    clear_error(["simulate", str(trt), "--hw", "h200-sxm", "--reprice", "--engine", "lmdeploy"], capsys,
                "unknown engine 'lmdeploy'; expected one of ['mpsim', 'sglang', 'sglang-torchnative', "
                "'trtllm', 'turbomind', 'vllm']")
    clear_error(["simulate", str(trt), "--hw", "h200-sxm", "--reprice", "--engine", "mpsim"], capsys,
                "fuses kv_write, rope into its attention kernels on hopper")
    vllm = _synth(tmp_path, "vllm", "--policy", "w4", "--engine", "vllm")
    back = tmp_path / "back.parquet"
    got = _simulate(vllm, tmp_path, "--reprice", "--engine", "mpsim", "--reprice-out", str(back))
    assert "repriced" in capsys.readouterr().out
    assert read_trace(back).rows.equals(read_trace(_synth(tmp_path, "own", "--policy", "w4")).rows)
    assert "machete_gemm" not in set(got["kernel"])


def test_a_policy_the_engine_cannot_run_is_one_error(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.parquet")
    line = clear_error([*SYNTH, "--policy", "ap3", "--engine", "trtllm", "--out", out], capsys)
    assert line == f"mpsim: error: {UNSUPPORTED}"
    clear_error(["serve", "--model", "tiny", "--policy", "w4+kv4", "--hw", "h200-sxm", "--engine", "vllm",
                 "--rate", "1", "--requests", "2", "--out", str(tmp_path / "s")], capsys,
                "engine 'vllm' cannot run policy 'w4+kv4': it has no int4 KV cache (kv4)")
    assert not (tmp_path / "x.parquet").exists()


def test_serve_turbomind_w4_kv8(tmp_path: Path) -> None:
    args = ["serve", "--model", "tiny", "--policy", "w4+kv8", "--hw", "h200-sxm", "--rate", "20",
            "--requests", "6", "--prompt-len", "24", "--gen-len", "6"]
    assert main([*args, "--engine", "turbomind", "--out", str(tmp_path / "tm")]) == 0
    assert main([*args, "--out", str(tmp_path / "own")]) == 0
    tm = json.loads((tmp_path / "tm" / "summary.json").read_text())
    own = json.loads((tmp_path / "own" / "summary.json").read_text())
    assert (tm["config"]["engine"], own["config"]["engine"]) == ("turbomind", "mpsim")
    tpot = pd.read_parquet(tmp_path / "tm" / "requests.parquet")["tpot_s"]
    assert tpot.notna().all() and (tpot > 0).all()
    # TurboMind's fp16 lm_head is a cuBLAS GEMM (mpsim's: its GEMV): the iterations cost differently
    assert tm["tpot_mean_s"] != own["tpot_mean_s"]


def test_a_sweep_with_an_engine_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("models: [tiny]\npolicies: [fp16, w4]\nengines: [mpsim, vllm]\n"
                    "hardware: [h200-sxm, l40s]\nworkloads: [{prompt_len: 16, gen_len: 3}]\n"
                    "perf_models: [sim]\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    table = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(zip(table["engine"], table["policy"], table["hw"], strict=True)) == sorted(
        (e, p, h) for e in ("mpsim", "vllm") for p in ("fp16", "w4") for h in ("h200-sxm", "l40s"))
    assert table["tpot_s"].map(math.isfinite).all()
    fp16 = table[table["policy"] == "fp16"]
    assert (fp16["speedup_vs_fp16"] == 1.0).all()  # each engine over its own fp16
    by = fp16.set_index(["engine", "hw"])["tpot_s"]
    assert by["vllm", "h200-sxm"] != by["mpsim", "h200-sxm"]
    spec.write_text(spec.read_text().replace("engines: [mpsim, vllm]", "engines: [mpsim, trtllm]")
                    .replace("policies: [fp16, w4]", "policies: [fp16, ap3]"))
    clear_error(["sweep", str(spec), "--out", str(tmp_path / "bad")], capsys,
                f"{spec}: engines[1]: engine 'trtllm' cannot run policy 'ap3'")


def test_mpsim_engines_lists_kernels_and_stand_ins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    for name in ("mpsim:", "sglang:", "trtllm:", "turbomind:", "vllm:"):
        assert f"\n{name}" in f"\n{out}"
    assert "trtllm_wo_gemv (M <= 4); trtllm_fpaintb_gemm\n" in out
    assert ("rope                      fused on ada/hopper/blackwell; vllm_rotary_embedding [stands in for "
            "RoPE fused") in out
    assert "trtllm_tg_decode on blackwell; fa3_decode on ampere [stands in for" in out
    assert "runs: weights fp16, int4-group (groups 128); KV cache kv16, kv8, kv4" in out
    clear_error(["engines", "tensorrt"], capsys, "unknown engine 'tensorrt'")


def test_op_with_an_engine(capsys: pytest.CaptureFixture[str]) -> None:
    gemm = ["op", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--w-format", "group", "--bits", "4",
            "--hw", "h200-sxm"]
    assert main([*gemm, "--engine", "trtllm"]) == 0
    out = capsys.readouterr().out
    assert "engine trtllm on hopper: gemm int4-group at M=1 runs trtllm_wo_gemv" in out
    assert "\ntrtllm_wo_gemv on h200-sxm" in out
    assert main([*gemm, "--engine", "vllm"]) == 0
    assert "gemm int4-group at M=1 runs machete_gemm\n" in capsys.readouterr().out
    clear_error([*gemm, "--engine", "trtllm", "--kernel", "cublas_gemm"], capsys, "both pick the kernel")
    clear_error(["op", "gemm", "--m", "1", "--n", "64", "--k", "64", "--w-format", "anyprec", "--bits", "3",
                 "--hw", "h200-sxm", "--engine", "trtllm"], capsys,
                "engine 'trtllm' has no gemm kernel for anyprec")


def test_a_sweeps_serve_section_runs_per_engine(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("models: [tiny]\npolicies: [w4]\nengines: [mpsim, turbomind]\nhardware: [h200-sxm]\n"
                    "serve: {rates: [5], requests: 4, prompt_len: 16, gen_len: 4}\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    table = pd.read_parquet(tmp_path / "out" / "serve_results.parquet")
    assert table["engine"].tolist() == ["mpsim", "turbomind"]
    assert table["tpot_mean_s"].nunique() == 2


def test_plot_prices_a_trace_as_another_engine_only_when_asked(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    vllm = _synth(tmp_path, "vllm", "--policy", "w4", "--engine", "vllm")
    plot = ["plot", "--kind", "roofline", "--trace", str(vllm), "--hw", "h200-sxm",
            "--perf-model", "roofline"]
    out = tmp_path / "r.png"
    assert main([*plot, "--engine", "trtllm", "--reprice", "--out", str(out)]) == 0
    assert "repriced" in capsys.readouterr().out and out.stat().st_size > 1000
    clear_error([*plot, "--engine", "trtllm", "--out", str(tmp_path / "x.png")], capsys, "add --reprice")


def test_quant_method_on_synth_and_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--quant-method picks the kernel the engine runs for that checkpoint (vLLM RTN: Marlin on
    Hopper, GPTQ: Machete; TRT-LLM AWQ: the pre-quant scale launch before each CUTLASS GEMM)."""
    gemm = ["op", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--w-format", "group", "--bits",
            "4", "--hw", "h100-sxm", "--engine", "vllm"]
    for method, kernel in (("rtn", "marlin_gemm"), ("gptq", "machete_gemm")):
        assert main([*gemm, "--quant-method", method]) == 0
        assert f"runs {kernel}" in capsys.readouterr().out
    kernels = {}
    for method in ("awq", "gptq"):
        trace = _synth(tmp_path, method, "--policy", "w4g128", "--batch", "8", "--engine", "trtllm",
                       "--quant-method", method)
        kernels[method] = set(read_trace(trace).rows["kernel"])
    assert "trtllm_awq_prescale" in kernels["awq"] - kernels["gptq"]


def test_an_engines_attention_is_its_librarys_dispatch_whichever_room_serves_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """TensorRT-LLM's Blackwell op sends more than 32 query heads a KV head to MMHA (its Hopper
    room's kernel): `op --engine trtllm` prices that and says so (an error naming the file's max_m
    cut-off before); 32 / 8 heads stay on trtllm-gen."""
    mqa = ["op", "attention", "--batch", "16", "--q-len", "1", "--kv-len", "1024", "--heads", "96",
           "--kv-heads", "1", "--head-dim", "64", "--engine", "trtllm", "--hw", "b200-sxm"]
    assert main(mqa) == 0
    out = capsys.readouterr().out
    assert ("engine trtllm on blackwell: decode_attention kv16 at M=16 runs trtllm_tg_decode "
            "(its dispatch: trtllm_mmha_decode)") in out
    assert "\ntrtllm_mmha_decode on b200-sxm" in out
    gqa = [*mqa[:8], "--heads", "32", "--kv-heads", "8", "--head-dim", "128", *mqa[-4:]]
    assert main(gqa) == 0
    out = capsys.readouterr().out
    assert "at M=16 runs trtllm_tg_decode\n" in out and "\ntrtllm_tg_decode on b200-sxm" in out
