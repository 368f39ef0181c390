"""`mpsim train-tiny` as a reproducible recipe for byte-level models of any size: a config file of
TinyConfig fields, a wall-clock limit whose stopping step is written back (so the written config
repeats the run), clear errors for bad settings, and the written folder usable as `--model DIR` by
the commands that take the tiny model (byte tokenizer, stdlib windows by default)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from mpsim.cli import main
from mpsim.engine.tokenizer import ByteTokenizer, is_byte_level_folder, load_tokenizer
from mpsim.errors import MpsimInputError
from mpsim.tiny.shipped import open_text_model
from mpsim.tiny.torch_llama import TorchLlama
from mpsim.tiny.train import TinyConfig, train_tiny

MICRO = {"name": "micro-byte", "hidden": 32, "layers": 1, "heads": 2, "kv_heads": 1, "ffn": 64, "seq_len": 16,
         "batch": 2, "steps": 4, "warmup": 1, "eval_every": 2, "eval_windows": 4, "train_bytes": 100_000,
         "threads": 1}


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("micro")
    cfg = _write(folder / "settings.json", MICRO)
    assert main(["train-tiny", "--config", str(cfg), "--out", str(folder / "model")]) == 0
    return folder / "model"


def test_a_config_file_sets_any_subset_of_fields() -> None:
    cfg = TinyConfig(**MICRO)  # type: ignore[arg-type]
    assert (cfg.hidden, cfg.steps, cfg.lr) == (32, 4, TinyConfig().lr)
    assert cfg.params() == sum(p.numel() for p in TorchLlama(cfg.spec(), cfg.seq_len).parameters())
    assert TinyConfig().params() == 1_902_336  # the shipped model's 1.9 M


@pytest.mark.parametrize(("settings", "says"), [
    ({"hiden": 384}, "unknown train-tiny setting(s) hiden"),
    ({"steps": -1}, "steps must be a non-negative number"),
    ({"steps": 2.5}, "steps must be an integer"),
    ({"layers": True}, "layers must be a non-negative number"),
    ({"hidden": 100, "heads": 3}, "must divide into heads"),
    ({"steps": 10, "stop_at": 11}, "stop_at 11 must be in 1..steps (10)"),
    ({"max_minutes": 0}, "max_minutes must be > 0"),
    ({"name": ""}, "name must be a non-empty string"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_settings_are_one_clear_error_naming_the_file(tmp_path: Path, settings: object,
                                                          says: str) -> None:
    path = _write(tmp_path / "bad.json", settings)
    with pytest.raises(MpsimInputError) as err:
        TinyConfig.from_json(path)
    assert str(path) in str(err.value) and says in str(err.value)
    assert main(["train-tiny", "--config", str(path), "--out", str(tmp_path / "out")]) == 2


def test_the_written_config_repeats_the_run(trained: Path, tmp_path: Path) -> None:
    written = json.loads((trained / "train_config.json").read_text())
    assert written == asdict(TinyConfig(**MICRO))  # type: ignore[arg-type]
    assert json.loads((trained / "config.json").read_text())["_name_or_path"] == "micro-byte"
    again = train_tiny(tmp_path / "again", TinyConfig.from_json(trained / "train_config.json"))
    a, b = load_file(str(trained / "model.safetensors")), load_file(str(again / "model.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_wall_clock_limit_writes_the_step_it_stopped_at(tmp_path: Path) -> None:
    cfg = TinyConfig(**(MICRO | {"max_minutes": 1e-9}))  # type: ignore[arg-type]
    out = train_tiny(tmp_path / "short", cfg)
    written = TinyConfig.from_json(out / "train_config.json")
    assert (written.stop_at, written.max_minutes, written.steps) == (1, None, MICRO["steps"])
    log = (out / "train_log.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in log[1:]] == ["0", "1"]  # evaluated where it stopped
    rerun = train_tiny(tmp_path / "rerun", written)  # no clock: stops at the same step
    a, b = load_file(str(out / "model.safetensors")), load_file(str(rerun / "model.safetensors"))
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_the_folder_is_a_byte_level_model(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert is_byte_level_folder(trained) and isinstance(load_tokenizer(trained), ByteTokenizer)
    model = open_text_model(str(trained))
    assert model.byte_level and model.spec.hidden == 32 and model.name == "micro-byte"
    assert open_text_model("tiny").byte_level
    rc = main(["quality", "--model", str(trained), "--policy", "ap4", "--samples", "2", "--prompt-len", "8",
               "--gen-len", "4"])  # the stdlib windows, as for tiny: no --prompts needed
    assert rc == 0 and "ap4" in capsys.readouterr().out


def test_a_folder_without_tokenizer_or_byte_marker_is_still_an_error(trained: Path, tmp_path: Path) -> None:
    cfg = json.loads((trained / "config.json").read_text())
    del cfg["mpsim_tokenizer"]
    _write(tmp_path / "config.json", cfg)
    with pytest.raises(MpsimInputError, match="no tokenizer"):
        load_tokenizer(tmp_path)
