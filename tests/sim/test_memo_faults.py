"""The simulator's disk memo only saves work: a damaged memo file or entry (unreadable, of the wrong
type, edited by hand) is discarded with a warning and computed again, giving the same results as a
clean run; a memo that cannot be written is a warning, and the computed results are kept."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mpsim.cli import main
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.synth import synthesize
from mpsim.traces.io import write_trace
from mpsim.workload import Workload


def _trace() -> Any:
    return synthesize(PRESETS["mobilellama-1.4b"], parse_policy("w4+kv8"), Workload(16, 2, 1))


def _first_outcome(raw: dict[str, Any]) -> dict[str, Any]:
    """The outcome of the file's first entry (an entry holds it under "outcome" where sealed)."""
    entry = raw if "key" in raw else raw[next(iter(raw))]  # a step file holds one entry
    outcome: dict[str, Any] = entry.get("outcome", entry)
    return outcome


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        raw = json.loads(path.read_text())
        change(_first_outcome(raw))
        path.write_text(json.dumps(raw))
    return apply


def _scale_cycles(o: dict[str, Any]) -> None:
    o["cycles"] = o["cycles"] * 10  # a plausible number, typed right: only a checksum tells


def _empty_columns(o: dict[str, Any]) -> None:
    o["columns"] = {}


# case -> (hardware, memo file pattern, damage)
CASES: dict[str, tuple[str, str, Callable[[Path], None]]] = {
    "unreadable": ("h100-sxm", "*[0-9a-f].json", lambda p: p.write_text("{not json")),
    "not an object": ("h100-sxm", "*[0-9a-f].json", lambda p: p.write_text("[1, 2]")),
    "mistyped cycles": ("h100-sxm", "*[0-9a-f].json", _edit(lambda o: o.update(cycles="abc"))),
    "hand-edited number": ("h100-sxm", "*[0-9a-f].json", _edit(_scale_cycles)),
    "npu step: empty columns": ("npu-llm", "*.steps/*.json", _edit(_empty_columns)),
    "npu step: hand-edited": ("npu-llm", "*.steps/*.json", _edit(lambda o: o.update(duration_s=1.0))),
    "npu step: unreadable": ("npu-llm", "*.steps/*.json", lambda p: p.write_text("{not json")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_memo_is_discarded_with_a_warning_and_recomputed(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hw_name, pattern, damage = CASES[case]
    tr, hw = _trace(), load_hardware(hw_name)
    clean = simulate(tr, hw, cache_dir=tmp_path)
    memo_file = sorted(tmp_path.glob(pattern))[0]  # the launch memo is one file, a step one per step
    damage(memo_file)
    capsys.readouterr()
    again = simulate(tr, hw, cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert f"mpsim: warning: {memo_file}" in err, err
    assert again.stats["simulated"] >= 1
    pd.testing.assert_frame_equal(again.launches, clean.launches)
    third = simulate(tr, hw, cache_dir=tmp_path)  # the memo was rebuilt: quiet, nothing simulated
    assert capsys.readouterr().err == "" and third.stats["simulated"] == 0


def test_a_memo_that_cannot_be_written_warns_and_keeps_the_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tr, hw = _trace(), load_hardware("h100-sxm")
    (tmp_path / "blocker").write_text("a file")
    memo = tmp_path / "blocker" / "memo"
    kept = simulate(tr, hw, cache_dir=memo)
    err = capsys.readouterr().err
    assert f"the simulator's memo was not saved (cannot write {memo}/" in err, err
    assert f"{tmp_path / 'blocker'} is a file, not a folder" in err
    pd.testing.assert_frame_equal(kept.launches, simulate(tr, hw, cache_dir=None).launches)
    assert (tmp_path / "blocker").read_text() == "a file"


def test_the_memo_folder_under_a_file_is_a_warning_on_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(_trace(), tmp_path / "t.parquet")
    (tmp_path / "blocker").write_text("a file")
    memo = tmp_path / "blocker" / "memo"
    assert main(["simulate", str(trace), "--hw", "h100-sxm", "--cache-dir", str(memo)]) == 0
    captured = capsys.readouterr()
    assert "mpsim: warning: the simulator's memo was not saved" in captured.err
    assert "Traceback" not in captured.err and "tokens/s" in captured.out


@pytest.mark.parametrize("bad", [True, "1.0", None, [1.0]])
def test_a_step_entry_with_a_value_that_is_not_a_number_is_rejected(bad: Any) -> None:
    from mpsim.sim.memo import _step

    good = {"columns": {"end": [1, 2.5]}, "bound": ["dram", "mac"], "duration_s": 2.5}
    assert _step(good) is good
    with pytest.raises(TypeError, match="column end"):
        _step({**good, "columns": {"end": [1.0, bad]}})
