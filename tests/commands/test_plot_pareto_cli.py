"""`mpsim plot --kind pareto` on the table `mpsim evaluate` writes (docs/sweeps.md: "draw it from an
evaluation table with `mpsim plot`"): a panel per hardware, the quality and speedup columns chosen by
--quality/--speedup."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.evaluate.figures import pareto_figure
from mpsim.cli import main

LABELS = ("fp16", "ap4", "ap3", "static")


def evaluation_table() -> pd.DataFrame:
    """The columns `mpsim evaluate` writes that the chart reads, two hardware models."""
    rows = []
    for hw, scale in (("h200-sxm", 1.0), ("npu-llm", 3.0)):
        for i, label in enumerate(LABELS):
            rows.append({"label": label, "kind": "policy" if i < 3 else "search", "detail": label,
                         "rouge_l_bytes": 1.0 - 0.05 * i, "rouge_l_words": 1.0 - 0.07 * i,
                         "rouge_l_ref_words": float("nan"), "hw": hw, "perf_model": "sim",
                         "speed_model": "mobilellama-1.4b", "speedup_vs_fp16": 1.0 + scale * 0.1 * i,
                         "speedup_vs_high": 1.0 + 0.05 * i})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_pareto_of_an_evaluation_table(tmp_path: Path, suffix: str) -> None:
    table = tmp_path / f"evaluation{suffix}"
    frame = evaluation_table()
    frame.to_parquet(table, index=False) if suffix == ".parquet" else frame.to_csv(table, index=False)
    out = tmp_path / "pareto.png"
    assert main(["plot", str(table), "--kind", "pareto", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    other = tmp_path / "words.png"
    assert main(["plot", str(table), "--kind", "pareto", "--quality", "rouge_l_words",
                 "--speedup", "speedup_vs_high", "--out", str(other)]) == 0
    assert other.stat().st_size > 10_000


def test_the_evaluation_pareto_has_a_panel_per_hardware_without_fp16() -> None:
    fig = pareto_figure(evaluation_table(), "rouge_l_words", "speedup_vs_high")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title().split(" ")[0] for ax in axes] == ["h200-sxm", "npu-llm"]
    assert {ax.get_ylabel() for ax in axes} == {"Rouge-L (words) vs fp16, test prompts"}
    assert {ax.get_xlabel() for ax in axes} == {"speedup over uniform high (tokens/s)"}
    labels = sorted(t.get_text() for t in axes[0].texts)
    assert labels == ["ap3", "ap4", "static"]  # fp16 (1, 1) left out


@pytest.mark.parametrize(("args", "says"), [
    (["--quality", "nope"], "lacks column(s) nope"),
    (["--quality", "rouge_l_ref_words"], "no entry other than fp16 has both speedup_vs_fp16 and "
                                          "rouge_l_ref_words"),
])
def test_a_pareto_of_missing_columns_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  args: list[str], says: str) -> None:
    table = tmp_path / "evaluation.parquet"
    evaluation_table().to_parquet(table, index=False)
    assert main(["plot", str(table), "--kind", "pareto", *args, "--out", str(tmp_path / "p.png")]) == 2
    assert says in capsys.readouterr().err
