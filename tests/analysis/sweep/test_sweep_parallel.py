"""Sweeps over parallel plans (issue 25): `tp`, `pp` and `micro_batches` axes beside `policies`,
for trace points and serve points, checked against every model before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.serve import max_rates
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.errors import MpsimInputError

SPEC = """
name: tp
models: [mobilellama-1.4b]
policies: [fp16, w4+kv8]
hardware: [h200-sxm]
tp: [1, 2]
workloads: [{prompt_len: 32, gen_len: 3, batch: 2}]
perf_models: [roofline]
serve:
  rates: [50]
  requests: 12
  prompt_len: 64
  gen_len: 8
  slo_tpot_ms: 50
  perf_model: roofline
  max_num_seqs: 16
"""


def test_tp_and_policy_axes_run_for_traces_and_serving(tmp_path: Path) -> None:
    spec = parse_spec(SPEC, "tp.yaml")
    assert spec.plans == ((1, 1), (2, 1)) and len(spec) == 4
    out = run_sweep(spec, tmp_path, workers=1, progress=False)
    table, served = out.table, out.serve_table
    assert served is not None
    assert sorted(zip(table["policy"], table["tp"], strict=True)) == [
        ("fp16", 1), ("fp16", 2), ("w4+kv8", 1), ("w4+kv8", 2)]
    assert len(set(table["key"])) == 4 and len(set(served["key"])) == 4
    two, one = (table[table["tp"] == n].set_index("policy") for n in (2, 1))
    assert (two["device_memory_bytes"] < one["device_memory_bytes"]).all()
    assert (two["launches"] > one["launches"]).all()  # the collectives' rows
    assert (one["device_memory_bytes"] == one["memory_bytes"]).all()
    per = served.set_index(["policy", "tp"])["output_tokens_per_s_per_device"]
    total = served.set_index(["policy", "tp"])["output_tokens_per_s"]
    assert per[("fp16", 2)] == pytest.approx(total[("fp16", 2)] / 2)
    rates = max_rates(served)
    assert sorted(rates["policy"]) == ["fp16", "fp16 tp2", "w4+kv8", "w4+kv8 tp2"]


def test_a_plan_a_model_cannot_take_is_the_specs_error() -> None:
    bad = SPEC.replace("tp: [1, 2]", "tp: [1, 3]")
    with pytest.raises(MpsimInputError, match=r"tp.yaml: tp/pp on mobilellama-1.4b: --tp 3 does not "
                                              r"divide the 16 query heads"):
        parse_spec(bad, "tp.yaml")
    with pytest.raises(MpsimInputError, match=r"tp.yaml: pp: expected a non-empty list of whole numbers"):
        parse_spec(SPEC + "pp: [0]\n", "tp.yaml")


MICRO = """
name: mb
models: [mobilellama-1.4b]
policies: [w4]
hardware: [h200-sxm]
pp: [2]
micro_batches: [1, 2]
workloads: [{prompt_len: 32, gen_len: 3, batch: 4}]
perf_models: [roofline]
"""


def test_micro_batches_axis_runs_pipelined_points(tmp_path: Path) -> None:
    spec = parse_spec(MICRO, "mb.yaml")
    assert spec.micro_batches == (1, 2) and len(spec) == 2
    table = run_sweep(spec, tmp_path, workers=1, progress=False).table.set_index("micro_batches")
    assert len(set(table["key"])) == 2
    assert table.loc[2, "launches"] == 2 * table.loc[1, "launches"]  # each micro-batch its own rows
    assert table.loc[2, "bubble_fraction"] < table.loc[1, "bubble_fraction"]  # the stages overlap
    assert (table["speedup_vs_fp16"].isna()).all()
    with pytest.raises(MpsimInputError, match=r"mb.yaml: micro_batches: 3 does not divide the batch of 4"):
        parse_spec(MICRO.replace("[1, 2]", "[1, 3]"), "mb.yaml")
    with pytest.raises(MpsimInputError, match=r"mb.yaml: micro_batches: expected a non-empty list"):
        parse_spec(MICRO.replace("[1, 2]", "[0]"), "mb.yaml")
