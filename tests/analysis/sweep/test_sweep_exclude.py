"""A sweep's holes: `exclude` leaves combinations out, and a policy a device cannot run is the spec's
error before any point runs, naming the pair and the entry that would leave it out."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.analysis.sweep.support import check_support, unsupported_pairs
from mpsim.errors import MpsimInputError

GRID = """
name: holes
models: [mobilellama-1.4b]
policies: [fp16, fp8+kv8f, w4]
hardware: [h100-sxm, a100-sxm-80gb, npu-llm, npu-edge]
workloads: [{prompt_len: 16, gen_len: 2}]
perf_models: [roofline]
"""


def test_devices_without_fp8_are_found_and_named() -> None:
    spec = parse_spec(GRID)
    pairs = {(p, h) for p, _, h, _ in unsupported_pairs(spec)}
    # A100 lists no fp8 tensor rate (its datasheet has none); npu-edge no fp8 MACs; npu-llm has them
    assert pairs == {("fp8+kv8f", "a100-sxm-80gb"), ("fp8+kv8f", "npu-edge")}
    with pytest.raises(MpsimInputError) as err:
        check_support(spec)
    text = str(err.value)
    assert "fp8+kv8f on a100-sxm-80gb" in text and "fp8+kv8f on npu-edge" in text
    assert "'fp8'" in text and "{policy: fp8+kv8f, hardware: npu-edge}" in text


def test_exclude_makes_holes_in_the_grid() -> None:
    spec = parse_spec(GRID + "exclude: [{policy: fp8+kv8f, hardware: npu-edge},\n"
                             "          {policy: fp8+kv8f, hardware: a100-sxm-80gb}]\n")
    check_support(spec)  # nothing left that a device cannot run
    hw_of = {g.policy: [p.hw for p in g.points] for g in spec.groups()}
    assert hw_of["fp8+kv8f"] == ["h100-sxm", "npu-llm"]
    assert hw_of["fp16"] == hw_of["w4"] == ["h100-sxm", "a100-sxm-80gb", "npu-llm", "npu-edge"]
    assert len(spec) == len(spec.keys()) == 3 * 4 - 2


def test_an_entry_pinning_one_key_removes_every_point_it_matches() -> None:
    spec = parse_spec(GRID + "exclude: [{hardware: npu-edge}, {policy: fp8+kv8f}]\n")
    assert [g.policy for g in spec.groups()] == ["fp16", "w4"]
    assert len(spec) == 2 * 3
    assert unsupported_pairs(spec) == []


@pytest.mark.parametrize(("entry", "needles"), [
    ("[{policy: fp8, hardware: npu-edge}]", ["exclude[0].policy", "'fp8'", "not in the spec's policies"]),
    ("[{hardware: b200-sxm}]", ["exclude[0].hardware", "'b200-sxm'"]),
    ("[{gpu: npu-edge}]", ["exclude[0].gpu", "unknown key"]),
    ("[{policy: [fp16, w4]}]", ["exclude[0].policy", "one name"]),
    ("[{policy: w9}]", ["exclude[0].policy"]),
    ("[]", ["exclude", "non-empty list"]),
    ("{policy: fp16}", ["exclude", "non-empty list"]),
])
def test_bad_exclude_names_the_entry(entry: str, needles: list[str]) -> None:
    with pytest.raises(MpsimInputError) as err:
        parse_spec(GRID + f"exclude: {entry}\n", "spec.yaml")
    assert all(n in str(err.value) for n in needles), str(err.value)


def test_a_sweep_with_an_unrunnable_pair_runs_no_point(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match="cannot run"):
        run_sweep(parse_spec(GRID), tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out" / "points").exists() or not any((tmp_path / "out" / "points").iterdir())


def test_an_excluded_sweep_runs_the_rest(tmp_path: Path) -> None:
    spec = parse_spec(GRID.replace("[h100-sxm, a100-sxm-80gb, npu-llm, npu-edge]", "[h100-sxm, npu-edge]")
                      + "exclude: [{policy: fp8+kv8f, hardware: npu-edge}]\n")
    out = run_sweep(spec, tmp_path / "out", workers=1, progress=False)
    table = out.table
    assert len(table) == 3 * 2 - 1
    assert set(zip(table["policy"], table["hw"], strict=True)) == {
        ("fp16", "h100-sxm"), ("fp16", "npu-edge"), ("fp8+kv8f", "h100-sxm"), ("w4", "h100-sxm"),
        ("w4", "npu-edge")}
    assert "exclude:" in (tmp_path / "out" / "spec.yaml").read_text()
