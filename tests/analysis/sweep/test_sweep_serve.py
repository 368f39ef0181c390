"""A sweep's serve section: validated whole, run resumably into its own table, SLOs reported."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.serve import COLUMNS, max_rates, slo_lines
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.errors import MpsimInputError

SPEC = """
name: srv
models: [mobilellama-1.4b]
policies: [fp16, w4+kv8]
hardware: [h200-sxm]
serve:
  rates: [100, 1000]
  requests: 40
  prompt_len: 128
  gen_len: uniform:8:24
  slo_tpot_ms: {slo}
  perf_model: roofline
  max_num_seqs: 64
"""


def test_the_section_is_checked_whole() -> None:
    spec = parse_spec(SPEC.format(slo=2))
    assert spec.serve is not None and spec.serve.rates == (100.0, 1000.0) and len(spec) == 0
    cfg = spec.serve.config()
    assert cfg.scheduler.max_num_seqs == 64 and cfg.slo.tpot_s == pytest.approx(0.002)
    for bad, message in (("rates: []", "serve.rates: expected a non-empty list"),
                         ("rates: [1, 1]", "listed more than once"),
                         ("rates: [1]\n  burst: 3", "serve.burst: unknown key"),
                         ("rates: [1]\n  arrivals: x.csv", "draws its arrivals"),
                         ("rates: [1]\n  prompt_len: many", "prompt_len 'many'"),
                         ("rates: [1]\n  requests: 5\n  duration_s: 3", "not both"),
                         ("rates: [1]\n  block_size: 0", "block-size must be >= 1")):
        text = f"models: [vicuna-7b]\npolicies: [fp16]\nhardware: [h200-sxm]\nserve:\n  {bad}\n"
        with pytest.raises(MpsimInputError, match=message):
            parse_spec(text, "s.yaml")
    with pytest.raises(MpsimInputError, match="needs workloads, a serve section, or both"):
        parse_spec("models: [vicuna-7b]\npolicies: [fp16]\nhardware: [h200-sxm]\n")


def test_a_serve_sweep_runs_resumes_and_reports(tmp_path: Path) -> None:
    spec = parse_spec(SPEC.format(slo=2), "srv.yaml")
    first = run_sweep(spec, tmp_path, workers=1, progress=False)
    table = first.serve_table
    assert table is not None and first.computed == 4 and list(table.columns) == list(COLUMNS)
    assert (tmp_path / "serve_results.parquet").is_file()
    assert len(list((tmp_path / "serve_points").iterdir())) == 4
    assert table["throughput_rps"].gt(0).all() and table["slo_met"].dtype == bool
    again = run_sweep(spec, tmp_path, workers=1, progress=False)
    assert again.computed == 0 and again.skipped == 4
    pd.testing.assert_frame_equal(again.serve_table, table)
    lines = slo_lines(table)
    assert len(lines) == 1 and lines[0].startswith("mobilellama-1.4b on h200-sxm (priced by roofline), "
                                                   "max swept rate meeting p99 TPOT <= 2 ms: ")


def test_an_slo_nobody_meets_is_said_so(tmp_path: Path) -> None:
    table = run_sweep(parse_spec(SPEC.format(slo=0.001)), tmp_path, workers=1, progress=False).serve_table
    assert table is not None and not table["slo_met"].any()
    assert max_rates(table)["max_rate_rps"].isna().all()
    (line,) = slo_lines(table)
    assert line.startswith("mobilellama-1.4b on h200-sxm (priced by roofline): no policy meets p99 TPOT "
                           "<= 0.001 ms at any swept rate")
