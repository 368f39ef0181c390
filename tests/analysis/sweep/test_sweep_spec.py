"""Sweep specs: a good spec expands to the grid with stable keys; a bad one is one line naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.analysis.sweep.spec import parse_spec, point_key
from mpsim.cli import main
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.workload import Workload

GOOD = """
name: tiny
models: [mobilellama-1.4b, vicuna-7b]
policies: [fp16, w4, ap4-4@3-3+kv8]
hardware: [h100-sxm, npu-llm]
workloads:
  - {prompt_len: 32, gen_len: 8, batch: 1}
  - {prompt_len: 64, gen_len: 4}
perf_models: [roofline]
"""


def test_grid_expands_in_order() -> None:
    spec = parse_spec(GOOD)
    groups = spec.groups()
    assert len(groups) == 2 * 3 * 2
    assert len(spec) == len(spec.keys()) == len(set(spec.keys())) == 2 * 3 * 2 * 2
    assert [g.model.name for g in groups[:6]] == ["mobilellama-1.4b"] * 6
    assert [g.policy for g in groups[:3]] == ["fp16", "w4", "ap4-4@3-3+kv8"]
    assert groups[3].workload == Workload(64, 4, 1)  # batch defaults to 1
    assert [p.hw for p in groups[0].points] == ["h100-sxm", "npu-llm"]


def test_workload_grid_is_a_product() -> None:
    text = GOOD.split("workloads:")[0] + ("workloads: {prompt_len: [16, 32], gen_len: 4, batch: [1, 2]}\n"
                                          "perf_models: [roofline]\n")
    loads = parse_spec(text).workloads
    assert loads == (Workload(16, 4, 1), Workload(16, 4, 2), Workload(32, 4, 1), Workload(32, 4, 2))


def test_keys_are_stable_and_change_with_what_decides_the_numbers() -> None:
    assert parse_spec(GOOD).keys() == parse_spec(GOOD).keys()
    model, hw, wl = get_model("vicuna-7b"), load_hardware("h100-sxm"), Workload(32, 8, 1)
    key = point_key(model, "w4", wl, hw, "roofline")
    assert key == point_key(get_model("vicuna-7b"), "w4", Workload(32, 8, 1), hw, "roofline")
    others = {point_key(get_model("llama-2-7b"), "w4", wl, hw, "roofline"),  # same shapes, other name
              point_key(model, "w3", wl, hw, "roofline"),
              point_key(model, "w4", Workload(32, 8, 2), hw, "roofline"),
              point_key(model, "w4", wl, load_hardware("h200-sxm"), "roofline"),
              point_key(model, "w4", wl, hw, "sim")}
    assert key not in others and len(others) == 5


@pytest.mark.parametrize(("edit", "needles"), [
    (("perf_models: [roofline]", "perf_models: [roofline]\nmodel: [x]"), ["model", "unknown key"]),
    (("batch: 1}", "batch: eight}"), ["workloads[0].batch", "integer", "eight"]),
    (("gen_len: 4}", "gen_len: 4, beams: 2}"), ["workloads[1].beams", "unknown key"]),
    (("vicuna-7b]", "vicuna-9b]"), ["models[1]", "vicuna-9b", "mobilellama-1.4b"]),
    (("w4,", "w5,"), ["policies[1]", "w5", "Grammar"]),
    (("npu-llm]", "npu-huge]"), ["hardware[1]", "npu-huge", "h200-sxm"]),
    (("[roofline]", "[cycle-exact]"), ["perf_models[0]", "cycle-exact", "roofline"]),
    (("policies: [fp16, w4", "policies: [fp16, fp16"), ["policies", "more than once", "fp16"]),
    (("name: tiny", "name: [tiny"), ["invalid YAML"]),
    (("models: [mobilellama-1.4b, vicuna-7b]\n", ""), ["models", "missing"]),
])
def test_bad_spec_names_the_key(edit: tuple[str, str], needles: list[str]) -> None:
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(MpsimInputError) as info:
        parse_spec(text, "bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml: ")
    for needle in needles:
        assert needle in message


def test_bad_spec_through_the_cli_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(GOOD.replace("batch: 1}", "batch: -2}"))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workloads[0].batch" in err[0] and "-2" in err[0]
    result = subprocess.run([sys.executable, "-m", "mpsim.cli", "sweep", str(tmp_path / "none.yaml"),
                             "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "none.yaml" in lines[0], result.stderr


def test_a_quant_method_reaches_every_point_and_its_key(tmp_path: Path) -> None:
    """`quant_method: gemlite` (synth --quant-method): every group and serve task carries it, the
    keys change only when it is set, a bad name is the spec's error, and the runner's pending tasks
    keep it (they rebuilt each group without it: a sweep ran Marlin for `gemlite`)."""
    from mpsim.analysis.sweep import serve
    from mpsim.analysis.sweep.run import pending_tasks
    from mpsim.analysis.sweep.store import PointStore

    base = ("models: [mobilellama-1.4b]\npolicies: [w4g64]\nengines: [sglang]\nhardware: [h100-sxm]\n"
            "workloads: [{prompt_len: 32, gen_len: 2}]\nperf_models: [roofline]\n"
            "serve: {rates: [2], requests: 4}\n")
    plain, tuned = parse_spec(base), parse_spec(base + "quant_method: gemlite\n")
    assert plain.quant_method is None and tuned.quant_method == "gemlite"
    assert [g.quant_method for g in tuned.groups()] == ["gemlite"]
    assert set(plain.keys()).isdisjoint(tuned.keys())
    assert set(serve.keys(plain)).isdisjoint(serve.keys(tuned))
    assert [t.quant_method for t in serve.tasks(tuned, set(), str(tmp_path))] == ["gemlite"]
    assert [t.group.quant_method for t in pending_tasks(tuned, PointStore(tmp_path))] == ["gemlite"]
    with pytest.raises(MpsimInputError, match=r"<spec>: quant_method: expected one of .*got 'hqq'"):
        parse_spec(base + "quant_method: hqq\n")
