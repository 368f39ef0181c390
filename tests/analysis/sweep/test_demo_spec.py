"""`mpsim demo --spec` with what a spec may name besides presets: a model's config.json and a hardware
YAML of one's own (the table knows them only by their `name`, the charts draw them all the same)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest

from mpsim.cli import main

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 2048,
          "_name_or_path": "mini-llama"}


def _config(tmp_path: Path) -> str:
    config = tmp_path / "mini" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(CONFIG))
    return str(config)


def _hardware(tmp_path: Path) -> str:
    text = (files("mpsim.hw_models") / "h200-sxm.yaml").read_text(encoding="utf-8")
    custom = tmp_path / "my-gpu.yaml"
    custom.write_text(text.replace("name: h200-sxm", "name: my-gpu", 1), encoding="utf-8")
    return str(custom)


@pytest.mark.parametrize(("own_model", "own_hw"), [(True, False), (False, True), (True, True)],
                         ids=["config.json", "hardware-yaml", "both"])
def test_demo_draws_a_spec_of_a_config_json_or_a_custom_hardware_yaml(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], own_model: bool, own_hw: bool) -> None:
    model = _config(tmp_path) if own_model else "mobilellama-1.4b"
    hw, hw_name = (_hardware(tmp_path), "my-gpu") if own_hw else ("npu-edge", "npu-edge")
    spec = tmp_path / "s.yaml"
    spec.write_text(f"models: [{model}]\npolicies: [fp16, w4]\nhardware: [{hw}]\n"
                    "workloads: [{prompt_len: 32, gen_len: 8, batch: 1}]\nperf_models: [roofline]\n")
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--spec", str(spec), "--workers", "1", "--no-progress"]) == 0
    figures = sorted(p.name for p in (out / "figures").iterdir())
    # validation.png: the committed H200 captures (traces/data/h200/) against the simulator
    assert figures == ["energy.png", "memory.png", f"roofline-{hw_name}.png", "speedup.png",
                       f"timeline-{hw_name}.png", "validation.png"]
    assert "Speedup over fp16" in capsys.readouterr().out


def test_demo_refuses_zero_workers_before_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("the sweep started before the arguments were checked")

    monkeypatch.setattr("mpsim.analysis.sweep.run.run_sweep", reached)
    assert main(["demo", "--out", str(tmp_path / "out"), "--workers", "0"]) == 2
    assert "--workers: expected an integer >= 1, got 0" in capsys.readouterr().err
