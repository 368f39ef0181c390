"""Kernels that are not mpsim's (cuBLAS, FA3 in vLLM, TensorRT-LLM wo GEMV, vLLM row-wise ops), the
power-limited clock, and the model-guided best config (API of mpsim/sim/gpu/library/ and
mpsim/sim/best_config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mpsim import library
from mpsim.cli import main
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import attention_row, framework_op_row, gemm_row
from mpsim.library import act_quant, cublas, fa3, torch, trtllm, vllm
from mpsim.sim import simulate
from mpsim.sim.best_config import best_config, best_gemm_row, with_best_gemm_configs
from mpsim.sim.gpu.library import EXTERNAL, launch_kernels
from mpsim.sim.gpu.model import lower_bound_s, simulate_gpu_launch
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.protocols import get_protocol
from mpsim.sim.replay import simulate_launch
from mpsim.traces.trace import rows_to_frame

H200: GpuSpec = load_hardware("h200-sxm")  # type: ignore[assignment]
H100: GpuSpec = load_hardware("h100-sxm")  # type: ignore[assignment]
A100: GpuSpec = load_hardware("a100-sxm-80gb")  # type: ignore[assignment]


def test_every_external_kernel_has_a_model_and_a_row_builder() -> None:
    assert set(EXTERNAL) == set(library.EXTERNAL_KERNELS)
    rows = [gemm_row(64, 4096, 4096, kernel=cublas.CUBLAS_GEMM),
            gemm_row(2, 4096, 4096, "group", 4, 4096, kernel=trtllm.TRTLLM_WO_GEMV),
            attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="fa3", kv_append=True, l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, kernel="fa3", kv_append=True),
            framework_op_row(vllm.VLLM_RMS_NORM, 512, 4096),
            framework_op_row(vllm.VLLM_SILU_MUL, 512, 11008),
            framework_op_row(vllm.VLLM_ROPE, 512, 4096, heads=32, kv_heads=32, head_dim=128),
            framework_op_row(torch.TORCH_ADD, 512, 4096, l2_warm=True),
            attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="trtllm", l2_warm=True),
            attention_row(1, 1, 128, 32, 32, 128, 16, kernel="trtllm", l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, 8, kernel="trtllm", fp8_attention=True),
            attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="sglang", l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, kernel="sglang"),
            attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="fa2", kv_append=True, l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, kernel="fa2", kv_append=True),
            attention_row(1, 1, 8192, 32, 8, 128, 8, kernel="flashinfer_attention", kv_append=True),
            attention_row(2, 1024, 1024, 32, 8, 128, 8, kernel="flashinfer_attention"),
            attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="flashinfer_trtllm", l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, kernel="flashinfer_trtllm", kv_append=True),
            attention_row(8, 1, 4096, 32, 8, 128, 8, kernel="trtllm_sm100", l2_warm=True),
            attention_row(2, 1024, 1024, 32, 8, 128, kernel="trtllm_sm100"),
            attention_row(2, 1024, 1024, 32, 8, 128, 8, kernel="trtllm_sm89", fp8_attention=True),
            attention_row(8, 1, 4096, 16, 2, 512, 8, kernel="sglang_triton", l2_warm=True),
            attention_row(2, 1024, 1024, 16, 8, 256, kernel="sglang_triton", window=512),
            attention_row(8, 1, 4096, 64, 4, 192, 8, kernel="vllm_triton", kv_append=True, l2_warm=True),
            attention_row(2, 1024, 1024, 64, 4, 192, 8, kernel="vllm_triton", window=128)]
    rows += [gemm_row(16, 4096, 4096, "group", 4, 128, kernel=k) for k in library.WO_GEMM_KERNELS]
    # GemLite's kernels by M (one row, 2..64, more): the first two zero their output first
    rows += [gemm_row(m, 4096, 4096, "group", 4, 64, kernel=k) for m, k in zip(
        (1, 32, 128), library.gemlite.KERNELS, strict=True)]
    rows += [framework_op_row(k, 512, 4096) for k in (*act_quant.KERNELS, trtllm.TRTLLM_AWQ_PRESCALE)]
    # issue 26's fp8 GEMMs on Hopper; the fp4 ones on Blackwell (no fp4 tensor cores on H200)
    fp8 = [gemm_row(64, 4096, 4096, "fp8-block" if "block" in k else "fp8", 8, kernel=k)
           for k in library.SCALED_GEMM_KERNELS if "nvfp4" not in k]
    fp4 = [gemm_row(64, 4096, 4096, "nvfp4", 4, kernel=k)
           for k in library.SCALED_GEMM_KERNELS if "nvfp4" in k]
    assert {r["kernel"] for r in rows + fp8 + fp4} == set(library.EXTERNAL_KERNELS)
    res = simulate(rows_to_frame(rows + fp8), H200, cache_dir=None).launches
    blackwell = simulate(rows_to_frame(fp4), load_hardware("b200-sxm"), cache_dir=None).launches
    for out in (res, blackwell):
        assert (out["time_s"] > 0).all() and (out["time_s"] >= out["t_lower_s"]).all()
    assert [launch_kernels(r) for r in rows + fp8 + fp4] == ([1, 1, 2, 2, 1, 1, 1, 1, 2, 1, 2, 2, 2]
                                                             + [3, 2, 3, 1, 1, 2, 3, 2, 2]  # sm_100 gen: 3
                                                             + [5, 4]  # SGLang Triton: store, casts, stages
                                                             + [3, 1]  # vLLM Triton: write, 3D, merge
                                                             + [1] * len(library.WO_GEMM_KERNELS)
                                                             + [2, 2, 1]
                                                             + [1] * (len(act_quant.KERNELS) + 1)
                                                             + [1] * (len(fp8) + len(fp4)))
    assert res["overhead_s"].iloc[2] == pytest.approx(2 * get_protocol("graph").per_launch_us * 1e-6)


def test_a_kv_cache_that_fits_l2_is_read_from_it_across_replays() -> None:
    """Decode rows: 8k tokens x 8 KV heads of bf16 (33.5 MB) stay in H200's L2 when replayed."""
    warm = attention_row(1, 1, 8192, 32, 8, 128, kernel="fa3", l2_warm=True)
    cold = attention_row(1, 1, 8192, 32, 8, 128, kernel="fa3")
    big = attention_row(2, 1, 8192, 32, 8, 128, kernel="fa3", l2_warm=True)  # 67 MB: does not fit
    w, c, b = (simulate_launch(r, H200) for r in (warm, cold, big))
    assert w.bytes_dram < 0.01 * c.bytes_dram and w.time_s < c.time_s
    assert b.bytes_dram > 60e6
    # the residency-aware bound credits the replayed cache too
    out = simulate(rows_to_frame([warm]), H200, cache_dir=None).launches.iloc[0]
    assert out.t_mem_s * H200.dram_bandwidth_Bps() < 1e5


def test_fp8_kv_decode_runs_on_the_fp8_tensor_rate_and_pays_the_v_transpose() -> None:
    bf16 = simulate_launch(attention_row(64, 1, 4096, 32, 8, 128, 16, kernel="fa3"), H200)
    fp8 = simulate_launch(attention_row(64, 1, 4096, 32, 8, 128, 8, kernel="fa3"), H200)
    assert fp8.bytes_dram < 0.55 * bf16.bytes_dram
    assert 0.5 * bf16.time_s < fp8.time_s < bf16.time_s  # fp8 pays its V transpose


def test_fa3_split_heuristic_matches_flash_attention() -> None:
    # hopper/heuristics.h: no split when the m-blocks fill 80% of the SMs or <= 4 KV blocks
    assert fa3.fa3_num_splits(128, 132, 64) == 1
    assert fa3.fa3_num_splits(8, 132, 4) == 1
    # the fewest splits within 85% of the best wave efficiency: 15 (8 x 15 = 120 of 132 SMs)
    assert fa3.fa3_num_splits(8, 132, 64) == 15
    assert fa3.fa3_decode_config(1, 32, 8, 128, 8192).split_k == 15


def test_cublas_token_tiles_split_m_evenly() -> None:
    from mpsim.sim.gpu.library.cublas import token_tile

    assert token_tile(257, 256, 8) == (136, 2)
    assert token_tile(4096, 128, 8) == (128, 32)
    assert token_tile(1, 16, 8) == (8, 1)


def test_the_power_limited_clock_falls_for_long_tensor_bound_launches_only() -> None:
    boost = H200.compute.boost_clock_MHz * 1e6
    long = simulate_gpu_launch(gemm_row(8192, 16384, 16384, kernel=cublas.CUBLAS_GEMM), H200,
                               DEFAULT_PARAMS)
    short = simulate_gpu_launch(gemm_row(1, 4096, 4096, kernel=cublas.CUBLAS_GEMM), H200, DEFAULT_PARAMS)
    norm = simulate_gpu_launch(framework_op_row(vllm.VLLM_RMS_NORM, 4096, 4096), H200, DEFAULT_PARAMS)
    # the 700 W limit holds a multi-ms GEMM near 1600 MHz (mpsim/sim/gpu/power.py; H200 GEMM rows)
    assert long.clock_hz < 0.82 * boost
    assert short.clock_hz > 0.99 * boost and norm.clock_hz == boost
    # the datasheet peak assumes 1830 MHz: a multi-ms GEMM sustains 0.75-0.81 of it (GEMM rows)
    flops = 2 * 8192 * 16384 * 16384
    assert 0.70 < flops / long.time_s / H200.matrix_peak_flops("bf16") < 0.85


def test_best_config_is_the_exact_argmin_over_its_candidates() -> None:
    m, n, k = 48, 4096, 11008
    cands = cublas.cublas_candidates(m, n, k)
    best = best_config(lambda c: gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=c), cands, H100)
    clock = best.outcome.clock_hz
    times = [simulate_gpu_launch(gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=c), H100,
                                 DEFAULT_PARAMS, clock_hz=clock).time_s for c in cands]
    assert times[cands.index(best.config)] == pytest.approx(min(times), rel=1e-9)
    assert best.simulated < 2 * len(cands)  # the lower bounds prune
    for c, t in zip(cands, times, strict=True):  # and are bounds
        row = gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=c)
        assert lower_bound_s(row, H100, DEFAULT_PARAMS, 0.0, clock) <= t * (1 + 1e-9)
    # what simulate() gives for the winning row is the predicted time
    again = simulate(rows_to_frame([best.row]), H100, cache_dir=None).launches.iloc[0]
    assert again.time_s == pytest.approx(best.predicted_s, rel=1e-12)


def test_best_config_never_loses_to_the_heuristic() -> None:
    for m, n, k, fmt, bits in [(64, 4096, 11008, "group", 4), (1, 11008, 4096, "anyprec", 3),
                               (512, 4096, 4096, "fp16", 16)]:
        heuristic = simulate_launch(gemm_row(m, n, k, fmt, bits), H200).time_s
        best = best_gemm_row(m, n, k, fmt, bits, hw=H200)
        assert best.predicted_s <= heuristic * (1 + 1e-9)
        assert best.config.kernel.startswith(("gemv", "gemm"))


def test_candidate_sets_per_architecture() -> None:
    hopper = lc.gemm_candidates(2048, 4096, 4096, "fp16", 16, None, "hopper")
    ampere = lc.gemm_candidates(2048, 4096, 4096, "fp16", 16, None, "ampere")
    assert any((c.block_m, c.block_n, c.num_warps) == (128, 256, 8) for c in hopper)
    assert all(c.block_n <= 128 for c in ampere if c.kernel.startswith("gemm"))
    small = lc.gemm_candidates(32, 4096, 4096, "int4-group", 4, 128, "hopper")
    assert any(c.kernel == "gemv_group_kernel" and c.split_k > 1 for c in small)
    assert gemm_row(32, 4096, 4096, "group", 4, config=small[-1])["kernel"] == small[-1].kernel


def test_op_config_best_states_its_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--kernel", "cublas_gemm",
                 "--config", "best", "--hw", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    n = len(cublas.cublas_candidates(64, 4096, 4096, 132))   # H100 SXM: 132 SMs
    assert f"best config of {n} candidates on h100-sxm" in out and "simulated launches" in out


def test_synth_config_best_needs_hw_and_only_moves_gemm_configs(tmp_path: Path) -> None:
    from mpsim.models import PRESETS
    from mpsim.policy import parse_policy
    from mpsim.synth import synthesize
    from mpsim.workload import Workload

    tr = synthesize(PRESETS["mobilellama-1.4b"], parse_policy("w4"), Workload(32, 2, 1))
    tuned, info = with_best_gemm_configs(tr, A100)
    rows, new = tr.rows, tuned.rows
    gemm = rows["op"] == "gemm"
    assert info["shapes"] == len(rows.loc[gemm, ["m", "n", "k", "w_format"]].drop_duplicates())
    same = [c for c in rows.columns if c not in ("kernel", "grid", "config")]
    pd.testing.assert_frame_equal(rows[same], new[same])
    for col in ("kernel", "grid", "config"):  # values (the categories grow by the new configs)
        assert rows.loc[~gemm, col].astype(str).equals(new.loc[~gemm, col].astype(str))
    assert (simulate(tuned, A100, cache_dir=None).summary.total_s
            <= simulate(tr, A100, cache_dir=None).summary.total_s * (1 + 1e-9))
    out = tmp_path / "t.parquet"
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "8",
                 "--gen-len", "2", "--out", str(out), "--config", "best"]) == 2  # needs --hw
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "8",
                 "--gen-len", "2", "--out", str(out), "--config", "best", "--hw", "a100-sxm-80gb"]) == 0
    from mpsim.traces.io import read_trace
    meta = read_trace(out).meta
    assert "best for a100-sxm-80gb" in json.dumps(meta.environment)
