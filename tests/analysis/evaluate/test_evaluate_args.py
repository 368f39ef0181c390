"""`mpsim evaluate` checks every argument before any work starts: a bad value is one error, and the
model is never opened nor a generation run (both are replaced here by a step that fails the test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpsim.analysis.evaluate.config import EvalConfig, check_config
from mpsim.cli import main
from mpsim.errors import MpsimInputError


def _reached(*args: object, **kwargs: object) -> None:
    raise AssertionError("an expensive step ran before the arguments were checked")


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mpsim.commands.evaluate._model", _reached)
    monkeypatch.setattr("mpsim.analysis.evaluate.run.DecoderPool", _reached)
    monkeypatch.setattr("mpsim.commands.evaluate.run_evaluation", _reached)


BAD = [
    (["--schedulers", "static,bogus"], "--schedulers: unknown scheduler 'bogus'; valid: uniform-high"),
    (["--schedulers", "budget@x"], "scheduler 'budget@x': expected budget@BITS"),
    (["--schedulers", "budget@9"], "scheduler 'budget@9': expected a target of 3..4 bits"),
    (["--schedulers", ","], "--schedulers: expected a comma-separated list of at least one name"),
    (["--hw", "h200-sxm,no-such-gpu"], "--hw: "),
    (["--hw", ""], "--hw: expected a comma-separated list of at least one name"),
    (["--segments", "0"], "--segments: expected 1..32"),
    (["--segments", "33"], "--segments: expected 1..32"),
    (["--gen-len", "4", "--segments", "5"], "--segments: expected 1..4"),
    (["--policies", "fp16,w5,ap4,ap3"], "--policies: bad policy 'w5'"),
    (["--policies", "fp16,ap4"], "the schedulers switch between the highest and lowest `ap` widths"),
    (["--ladder", "3,4"], "--ladder 3,4: ladder: expected >= 2 strictly decreasing widths"),
    (["--ladder", "9,3"], "--ladder: bad policy 'ap9'"),
    (["--budget-bits", "5"], "--budget-bits: expected a target of 3..4 bits"),
    (["--slack", "nan"], "--slack: expected a finite number"),
    (["--gen-len", "0"], "--gen-len: expected an integer >= 1, got 0"),
    (["--prompt-len", "-1"], "--prompt-len: expected an integer >= 1, got -1"),
    (["--val-samples", "0"], "--val-samples: expected an integer >= 1, got 0"),
    (["--test-samples", "0"], "--test-samples: expected an integer >= 1, got 0"),
    (["--seed", "-1"], "--seed: expected an integer >= 0, got -1"),
    (["--speed-model", "no-such-model"], "unknown model 'no-such-model'"),
    (["--val-prompts", "v.jsonl"], "--val-prompts needs --prompts"),
    (["--prompts", "no-such-file.jsonl"], "--prompts no-such-file.jsonl: no such file"),
]


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_argument_fails_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              args: list[str], says: str) -> None:
    assert main(["evaluate", *args, "--out", str(tmp_path / "ev")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpsim: error: ") and says in err, err
    assert not (tmp_path / "ev").exists()


def test_good_arguments_reach_the_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard above is real: with good arguments the replaced step is what stops the command."""
    monkeypatch.setattr("mpsim.commands.evaluate._model", _reached)
    with pytest.raises(AssertionError, match="expensive step"):
        main(["evaluate", "--schedulers", "static,budget@3.5", "--out", str(tmp_path / "ev")])


def test_the_library_entry_checks_first_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from mpsim.analysis.evaluate.run import evaluate
    from mpsim.models import get_model

    monkeypatch.setattr("mpsim.analysis.evaluate.run.DecoderPool", _reached)
    with pytest.raises(MpsimInputError, match=re.escape("--segments: expected 1..32")):
        evaluate(object(), EvalConfig(segments=0), get_model("vicuna-7b"), None)  # type: ignore[arg-type]
    assert check_config(EvalConfig()).widths == (4, 3)
