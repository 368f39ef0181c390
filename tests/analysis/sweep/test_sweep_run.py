"""Running sweeps: the same table from one process or several; a rerun computes nothing; the CLI path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.analysis.sweep.store import PointStore
from mpsim.cli import main

SPEC = """
name: small
models: [mobilellama-1.4b]
policies: [fp16, w4, ap4-4@4-3]
hardware: [h100-sxm, npu-edge]
workloads:
  - {prompt_len: 32, gen_len: 8, batch: 1}
  - {prompt_len: 16, gen_len: 6, batch: 2}
perf_models: [roofline]
"""


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    out = tmp_path_factory.mktemp("serial")
    outcome = run_sweep(parse_spec(SPEC), out, workers=1, progress=False)
    assert (outcome.computed, outcome.skipped) == (12, 0)
    return out, outcome.table


def test_table_has_a_row_per_point_in_grid_order(serial: tuple[Path, pd.DataFrame]) -> None:
    out, table = serial
    spec = parse_spec(SPEC)
    assert list(table["key"]) == spec.keys()
    assert table.equals(pd.read_parquet(out / "results.parquet"))
    assert table["policy"].tolist()[:6] == ["fp16", "fp16", "w4", "w4", "ap4-4@4-3", "ap4-4@4-3"]
    for column in ("ttft_s", "tpot_s", "tokens_per_s", "weights_bytes", "kv_cache_bytes",
                   "peak_activation_bytes", "avg_bits_pmpd", "avg_bits_mean", "lower_bound_s",
                   "energy_j", "j_per_token", "j_per_prompt_token", "avg_power_w",
                   "decode_dram_j_per_token"):
        assert table[column].notna().all() and (table[column] > 0).all(), column
    assert (table["decode_dram_j_per_token"] < table["j_per_token"]).all()


def test_speedup_is_over_fp16_of_the_same_model_hw_and_workload(serial: tuple[Path, pd.DataFrame]) -> None:
    _, table = serial
    assert (table.loc[table["policy"] == "fp16", "speedup_vs_fp16"] == 1.0).all()
    w4 = table[(table["policy"] == "w4") & (table["hw"] == "npu-edge") & (table["batch"] == 2)].iloc[0]
    fp16 = table[(table["policy"] == "fp16") & (table["hw"] == "npu-edge") & (table["batch"] == 2)].iloc[0]
    assert w4["speedup_vs_fp16"] == w4["tokens_per_s"] / fp16["tokens_per_s"]
    assert (table.loc[table["policy"] != "fp16", "speedup_vs_fp16"] > 1).all()  # fewer bytes, faster


def test_roofline_points_sit_on_their_lower_bound(serial: tuple[Path, pd.DataFrame]) -> None:
    _, table = serial
    # the bound credits L2 residency on a GPU (mpsim/sim/roofline.py); the roofline model does not
    npu = (table["hw"] == "npu-edge").to_numpy()
    assert np.array_equal(table["total_s"][npu], table["lower_bound_s"][npu])
    assert (table["total_s"] >= table["lower_bound_s"]).all()


def test_processes_give_the_same_table(serial: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    outcome = run_sweep(parse_spec(SPEC), tmp_path, workers=2, progress=False)
    pd.testing.assert_frame_equal(outcome.table, serial[1])
    keys = PointStore(tmp_path).computed_keys()
    assert sorted(keys) == sorted(parse_spec(SPEC).keys())  # each point computed exactly once


def test_rerun_computes_nothing_and_a_grown_spec_only_the_new(serial: tuple[Path, pd.DataFrame],
                                                                tmp_path: Path) -> None:
    out, table = serial
    log_before = PointStore(out).computed_keys()
    again = run_sweep(parse_spec(SPEC), out, workers=1, progress=False)
    assert (again.computed, again.skipped) == (0, 12)
    pd.testing.assert_frame_equal(again.table, table)
    assert PointStore(out).computed_keys() == log_before
    grown = parse_spec(SPEC.replace("[fp16, w4,", "[fp16, w4, w8,"))
    more = run_sweep(grown, out, workers=1, progress=False)
    assert (more.computed, more.skipped) == (4, 12)
    assert len(PointStore(out).computed_keys()) == len(log_before) + 4


def test_second_sweep_on_a_busy_folder_is_refused(tmp_path: Path) -> None:
    from mpsim.errors import MpsimInputError

    store = PointStore(tmp_path)
    with store.locked(), pytest.raises(MpsimInputError, match="another sweep"):
        run_sweep(parse_spec(SPEC), tmp_path, workers=1, progress=False)


def test_sweep_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("[fp16, w4, ap4-4@4-3]", "[fp16, w3]"))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "8 points (8 computed now, 0 already done)" in out
    assert len(pd.read_parquet(tmp_path / "o" / "results.parquet")) == 8


def test_simulator_points_respect_their_roofline_bound(tmp_path: Path) -> None:
    spec = parse_spec(SPEC.replace("[roofline]", "[sim, roofline]").replace("[fp16, w4, ap4-4@4-3]",
                                                                            "[fp16, ap4-4@4-3]"))
    table = run_sweep(spec, tmp_path, workers=1, progress=False).table
    sim = table[table["perf_model"] == "sim"].reset_index(drop=True)
    roof = table[table["perf_model"] == "roofline"].reset_index(drop=True)
    assert len(sim) == len(roof) == 8
    assert (sim["total_s"] >= sim["lower_bound_s"]).all()
    assert np.array_equal(sim["lower_bound_s"], roof["lower_bound_s"])  # one bound, both models


def test_demo_on_a_small_spec_writes_tables_charts_and_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("[fp16, w4, ap4-4@4-3]", "[fp16, w4]"))
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--spec", str(spec), "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Speedup over fp16" in printed and "bits(PMPD)" in printed
    assert len(pd.read_csv(out / "results.csv")) == 8
    figures = sorted(p.name for p in (out / "figures").iterdir())
    # the showcase run falls back to the table's first non-fp16 point: w4 on h100-sxm
    # validation.png: the committed H200 captures (traces/data/h200/) against the simulator
    assert figures == ["energy.png", "memory.png", "roofline-h100-sxm.png", "speedup.png",
                       "timeline-h100-sxm.png", "validation.png"]
    assert (out / "summary.txt").read_text().strip() in printed
