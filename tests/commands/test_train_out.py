"""The training commands never write into the installed package unless --out names it: `train-tiny`
writes ./tiny-model by default, `train-scheduler` of the shipped tiny model ./tiny-scheduler (another
model's classifier still goes to that model's own folder). The training itself is replaced here by a
stand-in that records where it would write; train-scheduler's arguments are checked before the
model opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mpsim.cli import main
from mpsim.tiny.shipped import inside_package, tiny_dir

MICRO = {"name": "micro-byte", "hidden": 32, "layers": 1, "heads": 2, "kv_heads": 1, "ffn": 64, "steps": 2}


@pytest.fixture
def tiny_writes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    written: list[Path] = []

    def train_tiny(out: Path, cfg: Any) -> Path:
        written.append(Path(out))
        return Path(out)

    monkeypatch.setattr("mpsim.tiny.train.train_tiny", train_tiny)
    monkeypatch.chdir(tmp_path)
    return written


def test_train_tiny_writes_here_by_default(tiny_writes: list[Path], tmp_path: Path) -> None:
    config = tmp_path / "micro.json"
    config.write_text(json.dumps(MICRO))
    assert main(["train-tiny"]) == 0
    assert main(["train-tiny", "--config", str(config)]) == 0
    assert [p.resolve() for p in tiny_writes] == [tmp_path / "tiny-model"] * 2
    assert not any(inside_package(p) for p in tiny_writes)


def test_train_tiny_rewrites_the_shipped_model_only_when_asked(tiny_writes: list[Path]) -> None:
    assert main(["train-tiny", "--out", str(tiny_dir())]) == 0
    assert tiny_writes == [tiny_dir()] and inside_package(tiny_writes[0])


@pytest.fixture
def classifier_writes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    written: list[Path] = []
    record = {"label_counts": [1, 1], "accuracy_heldout": 0.5, "majority_class_heldout": 0.5}

    def save_classifier(clf: Any, folder: Path, rec: Any) -> list[Path]:
        written.append(Path(folder))
        return [Path(folder) / "scheduler_learned.json"]

    monkeypatch.setattr("mpsim.schedulers.runs.DecoderPool", lambda *a: None)
    monkeypatch.setattr("mpsim.schedulers.train.make_training_data", lambda *a, **k: None)
    monkeypatch.setattr("mpsim.schedulers.train.train_classifier", lambda *a: (None, dict(record)))
    monkeypatch.setattr("mpsim.schedulers.learned.save_classifier", save_classifier)
    monkeypatch.chdir(tmp_path)
    return written


def test_train_scheduler_of_the_shipped_model_writes_here_by_default(
        classifier_writes: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train-scheduler"]) == 0
    assert [p.resolve() for p in classifier_writes] == [tmp_path / "tiny-scheduler"]
    assert "--learned tiny-scheduler" in capsys.readouterr().out
    assert main(["train-scheduler", "--out", str(tiny_dir())]) == 0  # asked for: the shipped folder
    assert classifier_writes[1] == tiny_dir()


@pytest.mark.parametrize(("args", "says"), [
    (["--ladder", "3,4"], "--ladder 3,4: ladder: expected >= 2 strictly decreasing widths"),
    (["--ladder", "4,1"], "--ladder: bad policy 'ap1'"),
    (["--segments", "0"], "--segments: expected 1..32"),
    (["--gen-len", "0"], "--gen-len: expected an integer >= 1, got 0"),
    (["--samples", "0"], "--samples: expected an integer >= 1, got 0"),
])
def test_train_scheduler_checks_its_arguments_before_the_model_opens(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str],
        says: str) -> None:
    def opened(name: str) -> None:
        raise AssertionError("the model opened before the arguments were checked")

    monkeypatch.setattr("mpsim.commands.evaluate._model", opened)
    assert main(["train-scheduler", *args]) == 2
    assert says in capsys.readouterr().err
