"""`mpsim simulate | op | validate | calibrate`, and calibration recovering a known perturbation.

No captured GPU trace exists yet, so the measured times here come from the simulator itself on a
"true" hardware file (the shipped one with perturbed knobs) plus 2% noise; calibration from the
shipped file must find the perturbation again and bring the held-out error down to the noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.calibrate_trace import calibrate
from mpsim.analysis.validation.constants import Constants, apply_hw, trace_constants_of
from mpsim.cli import main
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.keys import launch_keys, rep_row
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.replay import resident_cap, simulate_launch
from mpsim.synth import synthesize
from mpsim.traces.io import write_trace
from mpsim.workload import Workload

TRUE = Constants(bandwidth_fraction=0.72, launch_overhead_us=5.0, dequant_scale=1 / 0.6)
NOISE = 0.02


def _measured_trace(hw_name: str, path: Path) -> Path:
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("ap4-3"), Workload(64, 6, 1))
    true_hw = apply_hw(load_hardware(hw_name), TRUE)
    if true_hw.kind == "npu":  # measured one operator at a time: the isolated-launch model
        codes, reps = launch_keys(tr.rows, resident_cap(true_hw, DEFAULT_PARAMS))
        t = np.asarray([simulate_launch(rep_row(x), true_hw, resident=float(x["resident"])).time_s
                        for x in reps.to_dict("records")])[codes]
    else:
        t = simulate(tr, true_hw, cache_dir=None).launches["time_s"].to_numpy()
    noise = 1 + NOISE * np.random.default_rng(7).standard_normal(len(t))
    tr.rows["measured_us"] = pd.array(t * 1e6 * noise, dtype="Float64")
    write_trace(tr, path)
    return path


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _measured_trace("h200-sxm", tmp_path_factory.mktemp("sim_cli") / "measured.parquet")


@pytest.mark.parametrize("model", ["sim", "roofline"])
@pytest.mark.parametrize("hw_name", ["npu-llm", "a100-sxm-80gb"])
def test_simulate_out_has_energy_for_both_models(measured: Path, tmp_path: Path, model: str,
                                                 hw_name: str) -> None:
    out = tmp_path / "res.parquet"
    assert main(["simulate", str(measured), "--hw", hw_name, "--perf-model", model, "--out", str(out),
                 "--no-cache"]) == 0
    table = pd.read_parquet(out)
    assert (table["energy_j"] > 0).all()
    assert {"busy_start_s", "busy_end_s"} <= set(table.columns)
    assert (table["busy_start_s"] <= table["busy_end_s"]).all()


def test_simulate_writes_results_and_a_perfetto_timeline(measured: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out, timeline = tmp_path / "res.parquet", tmp_path / "tl.json"
    assert main(["simulate", str(measured), "--hw", "h100-sxm", "--out", str(out), "--timeline",
                 str(timeline), "--cache-dir", str(tmp_path / "memo")]) == 0
    text = capsys.readouterr().out
    assert "TTFT" in text and "simulated" in text and "bound:" in text
    table = pd.read_parquet(out)
    rows = pd.read_parquet(measured)
    assert len(table) == len(rows) and {"time_s", "bound", "t_lower_s", "module"} <= set(table.columns)
    assert (table["energy_j"] > 0).all() and "J/token decode" in text
    events = json.loads(timeline.read_text())["traceEvents"]
    launches = [e for e in events if e["ph"] == "X"]
    assert len(launches) == len(rows)
    assert launches[1]["ts"] == pytest.approx(launches[0]["ts"] + launches[0]["dur"])
    assert {"bound", "cycles", "t_lower_s"} <= set(launches[0]["args"])
    assert main(["simulate", str(measured), "--hw", "npu-llm", "--perf-model", "roofline", "--no-cache"]) == 0


def test_op_prints_time_and_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["op", "gemm", "--m", "1", "--n", "11008", "--k", "4096", "--w-format", "anyprec",
                 "--bits", "3", "--hw", "h200-sxm"]) == 0
    text = capsys.readouterr().out
    assert "gemv_anyprec_kernel" in text and "bound" in text and "t_lower" in text
    assert main(["op", "attention", "--batch", "1", "--q-len", "1", "--kv-len", "4096", "--heads", "32",
                 "--kv-heads", "8", "--head-dim", "128", "--kv-bits", "4", "--hw", "npu-llm"]) == 0
    assert "attention_decode_kernel" in capsys.readouterr().out
    assert main(["op", "gemm", "--m", "1", "--n", "8", "--k", "8", "--w-format", "int5",
                 "--hw", "h200-sxm"]) == 2
    assert "weight format 'int5'" in capsys.readouterr().err


def test_validate_reports_both_models_and_plots(measured: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    plot, rows_csv, summary_csv = tmp_path / "scatter.png", tmp_path / "rows.csv", tmp_path / "s.csv"
    assert main(["validate", str(measured), "--hw", "h200-sxm", "--plot", str(plot), "--out",
                 str(rows_csv), "--summary", str(summary_csv), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "all" in out and "protocol: none named" in out
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"
    rows = pd.read_csv(rows_csv)
    assert list(rows.columns[-5:]) == ["predicted_us", "roofline_us", "error", "config", "status"]
    assert len(rows) == len(pd.read_parquet(measured)) and set(rows["status"]) == {"ok"}
    table = pd.read_csv(summary_csv)
    both = table[table["cls"] == "all classes"].set_index("model")
    # The shipped file is off by the perturbation; the roofline ignores the kernels' own latencies.
    assert 10 < both.loc["simulator", "mape_pct"] < both.loc["roofline", "mape_pct"]
    assert both.loc["simulator", "pearson_r"] > 0.9


def test_validate_writes_no_plot_unless_asked(measured: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(measured), "--hw", "h200-sxm", "--no-cache"]) == 0
    assert not list(tmp_path.glob("*.png"))


def test_validate_needs_measured_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "synth.parquet"
    write_trace(synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("fp16"), Workload(8, 2, 1)), path)
    assert main(["validate", str(path), "--hw", "h200-sxm", "--no-cache"]) == 2
    assert "no measured_us" in capsys.readouterr().err


@pytest.mark.parametrize("hw_name", ["h200-sxm", "npu-llm"])
def test_calibration_recovers_the_perturbation(hw_name: str, tmp_path: Path) -> None:
    path = _measured_trace(hw_name, tmp_path / "m.parquet")
    rows = pd.read_parquet(path)
    result = calibrate(rows, load_hardware(hw_name))
    assert result.before == trace_constants_of(load_hardware(hw_name))
    got = result.after
    # the quantized GEMMs' unpipelined trips add bytes and dequantization in series, so bandwidth and
    # dequant scale trade along a shallow valley (h200: 0.675 and 1.63 against 0.72 and 1.67, held-out
    # MAPE 1.5%): what must hold tightly is the held-out error below
    assert got.bandwidth_fraction == pytest.approx(TRUE.bandwidth_fraction, rel=0.1)
    assert got.launch_overhead_us == pytest.approx(TRUE.launch_overhead_us, rel=0.05)
    if hw_name == "h200-sxm":  # the NPU decoder never binds at these sizes: its rate is invisible
        assert got.dequant_scale == pytest.approx(TRUE.dequant_scale, rel=0.1)
    assert result.test_mape_before > 10 * NOISE * 100
    assert result.test_mape_after < 1.5 * NOISE * 100  # the noise floor: E|N(0, 2%)| = 1.6%


def test_calibrate_writes_a_loadable_file_with_a_calibration_source(
        measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h200-calibrated.yaml"
    assert main(["calibrate", str(measured), "--hw", "h200-sxm", "--out", str(out)]) == 0
    assert "held-out MAPE" in capsys.readouterr().out
    hw = load_hardware(str(out))
    assert hw.name == "h200-calibrated"
    source = hw.source_of("dram.achievable_bandwidth_fraction")
    assert source.kind == "calibration" and "measured.parquet" in source.citation
    assert hw.source_of("dram.bandwidth_GBps").kind == "datasheet"
    assert hw.dram.achievable_bandwidth_fraction == pytest.approx(0.72, rel=0.1)  # see above
