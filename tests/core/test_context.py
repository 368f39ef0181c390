"""The context rule (mpsim/workload.py): one error past a model's context length, a warning with
--allow-beyond-context; and workloads too large to hold get one clear error, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.analysis.sweep.spec import parse_spec
from mpsim.errors import MpsimInputError
from mpsim.models import PRESETS, from_hf_config, get_model
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.workload import Workload, beyond_context, check_context

# max_position_embeddings of each preset's config.json
CONTEXT = {"vicuna-7b": 4096, "llama-2-7b": 4096, "mobilellama-1.4b": 2048, "stablelm-zephyr-3b": 4096,
           "phi-1.5": 2048, "llama-3-8b": 8192, "qwen2.5-1.5b": 131072, "llama-2-70b": 4096,
           "llama-3-70b": 8192, "qwen2.5-32b": 131072}


def test_every_preset_carries_its_context_and_source() -> None:
    assert {name: spec.max_context_len for name, spec in PRESETS.items()} == CONTEXT
    for spec in PRESETS.values():
        assert spec.context_source == f"{spec.source} max_position_embeddings"
    assert get_model("tiny").max_context_len == 1024


def test_hf_config_context(tmp_path: Path) -> None:
    cfg = {"model_type": "llama", "num_attention_heads": 4, "hidden_size": 64, "num_hidden_layers": 2,
           "intermediate_size": 128, "vocab_size": 100}
    (tmp_path / "a.json").write_text(json.dumps({**cfg, "max_position_embeddings": 512}))
    (tmp_path / "b.json").write_text(json.dumps(cfg))
    (tmp_path / "c.json").write_text(json.dumps({**cfg, "max_position_embeddings": "long"}))
    a = from_hf_config(tmp_path / "a.json")
    assert a.max_context_len == 512 and a.context_source.endswith("a.json max_position_embeddings")
    assert from_hf_config(tmp_path / "b.json").max_context_len is None  # unknown: no rule applies
    with pytest.raises(MpsimInputError, match="max_position_embeddings must be a positive integer"):
        from_hf_config(tmp_path / "c.json")


def test_the_rule() -> None:
    vicuna = PRESETS["vicuna-7b"]
    assert check_context(vicuna, 4000, 96) is None  # exactly the context
    with pytest.raises(MpsimInputError, match=r"4,200 tokens exceeds the context length of vicuna-7b "
                                              r"\(4,096 tokens.*--allow-beyond-context"):
        check_context(vicuna, 4000, 200)
    warning = check_context(vicuna, 4000, 200, allow_beyond=True)
    assert warning is not None and "running it anyway" in warning
    # a trace's metadata (a dict); one written before specs carried a context gets its preset's
    assert beyond_context({"name": "vicuna-7b"}, 4000, 200) == beyond_context(vicuna, 4000, 200)
    assert beyond_context({"name": "my-model"}, 10**6, 1) is None


def _mpsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpsim.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _one_line(result: subprocess.CompletedProcess[str], prefix: str, *needles: str) -> None:
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(prefix), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_synth_and_simulate_hold_the_rule(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    args = ("synth", "--model", "vicuna-7b", "--policy", "fp16", "--prompt-len", "4000", "--gen-len", "200",
            "--out", str(out))
    refused = _mpsim(*args)
    assert refused.returncode == 2 and not out.exists()
    _one_line(refused, "mpsim: error:", "exceeds the context length of vicuna-7b", "--allow-beyond-context")
    allowed = _mpsim(*args, "--allow-beyond-context")
    assert allowed.returncode == 0 and out.exists()
    _one_line(allowed, "mpsim: warning:", "exceeds the context length")
    refused = _mpsim("simulate", str(out), "--hw", "h200-sxm", "--no-cache")
    assert refused.returncode == 2
    _one_line(refused, "mpsim: error:", "exceeds the context length of vicuna-7b")
    allowed = _mpsim("simulate", str(out), "--hw", "h200-sxm", "--no-cache", "--allow-beyond-context")
    assert allowed.returncode == 0 and "TTFT" in allowed.stdout
    _one_line(allowed, "mpsim: warning:", "exceeds the context length")


@pytest.mark.parametrize(("prompt", "gen", "needle"), [
    ("100000000", "2", "flops = 82,720,000,827,200,000,000, beyond"),  # FLOPs past int64
    ("10", "100000000000", "would make 38,900,000,000,000 launches"),   # rows past any memory
])
def test_huge_workloads_are_one_clear_error(prompt: str, gen: str, needle: str, tmp_path: Path) -> None:
    args = ("synth", "--model", "vicuna-7b", "--policy", "fp16", "--prompt-len", prompt, "--gen-len", gen,
            "--out", str(tmp_path / "t.parquet"))
    _one_line(_mpsim(*args), "mpsim: error:", "exceeds the context length")
    result = _mpsim(*args, "--allow-beyond-context")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    assert needle in result.stderr.splitlines()[-1] and "too large" in result.stderr


def test_huge_values_in_the_library_are_input_errors() -> None:
    with pytest.raises(MpsimInputError, match="beyond what the trace's Int32 column holds"):
        synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(3_000_000_000, 1))


SPEC = """
models: [mobilellama-1.4b, vicuna-7b]
policies: [fp16]
hardware: [h200-sxm]
workloads: [{prompt_len: 512, gen_len: 64}, {prompt_len: 2048, gen_len: 256}]
"""


def test_sweep_specs_hold_the_rule() -> None:
    with pytest.raises(MpsimInputError, match=r"s\.yaml: workloads\[1\] on mobilellama-1.4b: prompt 2,048 "
                                              r"\+ 256 .* allow_beyond_context: true"):
        parse_spec(SPEC, "s.yaml")
    spec = parse_spec(SPEC + "allow_beyond_context: true\n", "s.yaml")
    assert len(spec.warnings) == 1 and "mobilellama-1.4b" in spec.warnings[0]
    assert parse_spec(SPEC, "s.yaml", allow_beyond_context=True).keys() == spec.keys()
    with pytest.raises(MpsimInputError, match="allow_beyond_context: expected true or false"):
        parse_spec(SPEC + "allow_beyond_context: sometimes\n", "s.yaml")
