"""`mpsim serve` refuses a negative --seed or --audit before any request is drawn or priced (a
negative seed was a numpy traceback, a negative audit silently no audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsim.cli import main


def _reached(*args: object, **kwargs: object) -> None:
    raise AssertionError("requests were drawn before the arguments were checked")


@pytest.mark.parametrize(("args", "says"), [
    (["--seed", "-1"], "--seed: expected an integer >= 0, got -1"),
    (["--audit", "-1"], "--audit: expected an integer >= 0, got -1"),
])
def test_a_negative_count_fails_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str], args: list[str],
                                                says: str) -> None:
    monkeypatch.setattr("mpsim.serve.arrivals.build_requests", _reached)
    assert main(["serve", "--model", "vicuna-7b", "--policy", "fp16", "--hw", "h200-sxm", "--rate", "5",
                 "--requests", "10", *args, "--out", str(tmp_path / "s")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
