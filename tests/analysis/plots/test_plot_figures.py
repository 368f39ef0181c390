"""The figures: each reads a table, draws what the table says, and writes PNG and/or SVG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from mpsim.analysis.plots.common import output_paths
from mpsim.analysis.plots.energy import energy_figure, plot_energy
from mpsim.analysis.plots.inputs import trace_run
from mpsim.analysis.plots.memory import memory_figure
from mpsim.analysis.plots.pareto import pareto_figure, pareto_front, plot_pareto
from mpsim.analysis.plots.roofline import kernel_classes, plot_roofline
from mpsim.analysis.plots.speedup import plot_speedup, speedup_figure
from mpsim.analysis.plots.timeline import plot_timeline, select_window
from mpsim.analysis.plots.validation import errors, plot_validation, validation_frame
from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.workload import Workload

PNG = b"\x89PNG\r\n\x1a\n"
SPEC = """
models: [mobilellama-1.4b, qwen2.5-1.5b]
policies: [fp16, w4, ap3]
hardware: [h100-sxm, npu-llm, npu-edge]
workloads: [{prompt_len: 16, gen_len: 4, batch: 1}]
perf_models: [roofline]
"""


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return run_sweep(parse_spec(SPEC), tmp_path_factory.mktemp("sweep"), workers=1, progress=False).table


@pytest.fixture(scope="module")
def run() -> pd.DataFrame:
    trace = synthesize(get_model("mobilellama-1.4b"), parse_policy("ap4-4@2-3"), Workload(16, 5, 1))
    return trace_run(trace, load_hardware("npu-llm"), "roofline")


def _bars(fig: object) -> list[Rectangle]:
    return [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle)]  # type: ignore[attr-defined]


def test_speedup_bars_are_the_table_speedups(table: pd.DataFrame, tmp_path: Path) -> None:
    fig = speedup_figure(table)
    heights = sorted(round(b.get_height(), 9) for b in _bars(fig))
    expected = sorted(round(v, 9) for v in table.loc[table["policy"] != "fp16", "speedup_vs_fp16"])
    assert heights == expected  # 2 models x 2 policies x 3 hardware panels, fp16 is the dashed line
    assert [ax.get_title().split(" |")[0] for ax in fig.axes] == ["h100-sxm", "npu-llm", "npu-edge"]
    paths = plot_speedup(table, tmp_path / "speedup")  # no suffix: both formats
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[0].read_bytes()[:8] == PNG and b"<svg" in paths[1].read_bytes()[:400]


def test_energy_bars_are_the_table_j_per_token(table: pd.DataFrame, tmp_path: Path) -> None:
    fig = energy_figure(table)
    solid = [b for b in _bars(fig) if not b.get_hatch()]
    hatched = [b for b in _bars(fig) if b.get_hatch()]
    assert sorted(round(b.get_height(), 12) for b in solid) == sorted(
        round(v, 12) for v in table["j_per_token"])
    assert sorted(round(b.get_height(), 12) for b in hatched) == sorted(
        round(v, 12) for v in table["decode_dram_j_per_token"])
    assert all(d.get_height() < t.get_height() for d, t in zip(
        sorted(hatched, key=lambda b: b.get_x()), sorted(solid, key=lambda b: b.get_x()), strict=True))
    [path] = plot_energy(table, tmp_path / "energy.png")
    assert path.read_bytes()[:8] == PNG
    with pytest.raises(MpsimInputError, match="no j_per_token"):
        energy_figure(table.assign(j_per_token=float("nan")))


def test_memory_stacks_add_up_to_the_memory_column(table: pd.DataFrame) -> None:
    fig = memory_figure(table)
    tops: dict[tuple[int, float], float] = {}
    for ax_i, ax in enumerate(fig.axes):
        for b in ax.patches:
            key = (ax_i, round(b.get_x(), 6))
            tops[key] = max(tops.get(key, 0.0), b.get_y() + b.get_height())
    per_model = table.drop_duplicates(["model", "policy"])
    assert sorted(round(v, 6) for v in tops.values()) == sorted(
        round(v, 6) for v in per_model["memory_bytes"] / 1e9)


def test_kernel_classes_keep_every_flop(run: pd.DataFrame, tmp_path: Path) -> None:
    cls = kernel_classes(run)
    assert cls["flops"].sum() == run["flops"].sum()
    no_flops = run.loc[run["flops"] == 0, "time_s"].sum() / run["time_s"].sum()  # embedding lookups
    assert cls["share"].sum() == pytest.approx(1 - no_flops, rel=1e-12)
    assert set(cls["phase"]) == {"prefill", "decode"}
    [path] = plot_roofline(run, load_hardware("npu-llm"), "test run", tmp_path / "r.png")
    assert path.read_bytes()[:8] == PNG


def test_timeline_window_is_one_decode_step_or_a_time_range(run: pd.DataFrame, tmp_path: Path) -> None:
    sel, what = select_window(run)
    assert what == "decode step 1"
    assert sel.index.tolist() == run.index[(run["phase"] == "decode") & (run["step"] == 1)].tolist()
    sel2, _ = select_window(run, start_ms=0.0, window_ms=float(run["end_s"].iloc[9]) * 1e3)
    assert sel2.index.tolist() == list(range(10))
    with pytest.raises(MpsimInputError, match="no launches in decode step 99"):
        select_window(run, step=99)
    [path] = plot_timeline(run, "test run", tmp_path / "t.svg", step=3)
    assert b"<svg" in path.read_bytes()[:400]


def test_validation_errors_and_chart(run: pd.DataFrame, tmp_path: Path) -> None:
    frame = pd.DataFrame({"op": ["gemm", "norm"], "measured_s": [2.0, 4.0], "predicted_s": [1.0, 5.0]})
    mape, total = errors(frame)
    assert mape == (0.5 + 0.25) / 2 and total == (6.0 - 6.0) / 6.0
    with pytest.raises(MpsimInputError, match="measured_us"):
        validation_frame(run.assign(measured_us=np.nan))
    measured = run.assign(measured_us=run["time_s"] * 1e6 * 1.2 + 2.0)
    vf = validation_frame(measured)
    assert len(vf) == len(run) and np.allclose(vf["predicted_s"], run["time_s"])
    [path] = plot_validation(vf, "test", tmp_path / "v.png")
    assert path.read_bytes()[:8] == PNG


def test_pareto_front_on_a_hand_made_table(tmp_path: Path) -> None:
    t = pd.DataFrame({"policy": ["fp16", "w8", "w4", "w3", "ap3", "ap4-3"],
                      "speedup": [1.0, 1.8, 3.2, 3.9, 4.2, 4.1],
                      "quality": [0.40, 0.40, 0.37, 0.33, 0.31, 0.36]})
    # fp16 ties w8 on quality and is slower; w3 loses to ap4-3 on both
    assert pareto_front(t).tolist() == [False, True, True, False, True, True]
    fig = pareto_figure(t)
    assert fig.axes[0].get_xlabel().startswith("speedup")
    [path] = plot_pareto(t, tmp_path / "p.png")
    assert path.read_bytes()[:8] == PNG


def test_figure_suffixes() -> None:
    assert [p.name for p in output_paths("a/b.svg")] == ["b.svg"]
    with pytest.raises(MpsimInputError, match=r"\.png, \.svg"):
        output_paths("fig.jpg")


def test_demo_draws_validation_from_a_captured_trace(tmp_path: Path) -> None:
    from mpsim.analysis.demo_report import draw_validation
    from mpsim.traces.io import write_trace

    data = tmp_path / "data"
    [skipped] = list(draw_validation(tmp_path, "roofline", data=_mkdir(data)))
    assert skipped.startswith("validation chart: skipped")
    trace = synthesize(get_model("mobilellama-1.4b"), parse_policy("w4"), Workload(16, 3, 1))
    rows = trace.rows.assign(device="NVIDIA H100 80GB HBM3")
    rows["measured_us"] = (rows["bytes_read"] / 2.5e9 + 4.0).astype(float)  # a made-up "measurement"
    write_trace(type(trace)(rows, trace.meta), data / "capture.parquet")
    [line] = list(draw_validation(tmp_path, "roofline", data=data))
    assert line == f"wrote {tmp_path / 'validation.png'}"
    assert (tmp_path / "validation.png").read_bytes()[:8] == PNG


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path
