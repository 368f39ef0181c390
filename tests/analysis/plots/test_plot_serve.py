"""Serving charts, checked on their contents: lines per policy, bars or a 'no policy' panel, a timeline."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from serve_cases import requests, serve

from mpsim.analysis.plots.serve import serve_capacity_figure, serve_latency_figure, serve_timeline_figure
from mpsim.cli import main
from mpsim.errors import MpsimInputError


def _table(slo_met: list[bool]) -> pd.DataFrame:
    rows = []
    for i, (policy, rate) in enumerate([(p, r) for p in ("fp16", "w4+kv8") for r in (1.0, 4.0)]):
        rows.append({"model": "vicuna-7b", "policy": policy, "hw": "h200-sxm", "rate": rate,
                     "tpot_p50_s": 0.01 * rate, "tpot_p99_s": 0.02 * rate, "ttft_p99_s": 0.1 * rate,
                     "throughput_rps": rate, "slo_ttft_s": None, "slo_tpot_s": 0.05,
                     "slo_met": slo_met[i]})
    return pd.DataFrame(rows)


def test_latency_lines_per_policy() -> None:
    fig = serve_latency_figure(_table([True] * 4))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert len(ax.get_lines()) == 2 * 2 + 1  # p99 and p50 per policy, the SLO
    assert ax.get_title() == "vicuna-7b on h200-sxm"  # (the perf model too, when the table has it)


def test_capacity_bars_and_the_no_policy_panel() -> None:
    fig = serve_capacity_figure(_table([True, False, True, True]))
    heights = sorted(p.get_height() for p in fig.axes[0].patches)
    assert heights == [1.0, 4.0]
    fig = serve_capacity_figure(_table([False] * 4))
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "No policy meets p99 TPOT <= 50 ms" in texts and "fp16 on h200-sxm at 1/s" in texts
    with pytest.raises(MpsimInputError, match="no SLO"):
        serve_capacity_figure(_table([False] * 4).assign(slo_tpot_s=None))


def test_timeline_of_a_run(tmp_path: Path) -> None:
    res = serve(requests(rate=800.0, n=60, prompt=128, gen=32), num_kv_blocks=60)
    fig = serve_timeline_figure(res.iterations, "run")
    top, bottom = fig.axes
    assert top.get_ylabel() == "KV blocks in use (%)" and len(bottom.get_lines()) >= 2
    res.iterations.to_parquet(tmp_path / "iterations.parquet")
    assert main(["plot", str(tmp_path / "iterations.parquet"), "--kind", "serve-timeline",
                 "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 0
