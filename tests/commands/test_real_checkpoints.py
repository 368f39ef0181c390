"""A real checkpoint end to end, on the CPU: a small random Llama-architecture HF folder with a real
tokenizer.json (trained at test time), through `mpsim quantize`, `generate`, `quality --prompts` and
`evaluate --prompts`; and each bad input the issue names gets one clear error naming the file and
line or tensor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hf_folder import make_hf_folder

from mpsim.cli import main

PROMPTS = [
    {"prompt": "The quick brown fox", "reference": "jumps over the lazy dog"},
    {"prompt": "def parse(self, text):", "reference": "return text.split()"},
    {"prompt": "Guten Morgen! Wie geht es dir?", "reference": "Good morning! How are you?"},
    {"prompt": "Summarize: the meeting moved to Tuesday"},
    {"prompt": "naive cafe with tabs", "reference": "ok"},
    {"prompt": "Bring the report", "reference": "on Tuesday"},
]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real")
    make_hf_folder(root / "hf")
    (root / "prompts.jsonl").write_text("\n".join(json.dumps(p) for p in PROMPTS) + "\n")
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_quantize_generate_quality_evaluate(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q, prompts = str(work / "ap4"), str(work / "prompts.jsonl")
    code, out, _ = _run(capsys, "quantize", "--model", str(work / "hf"), "--policy", "ap4", "--out", q)
    assert code == 0 and "default to --policy ap4" in out
    header = json.loads((work / "ap4" / "quantization.json").read_text())
    assert header["weights"] == {"family": "anyprec", "bits": 4, "seed_bits": 2}
    assert header["sensitivity"] is None
    files = {p.name for p in (work / "ap4").iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= files

    code, out, _ = _run(capsys, "generate", "--model", q, "--prompt", "The quick brown", "--gen-len", "6",
                        "--backend", "triton")  # Triton kernels: the CPU interpreter here
    assert code == 0 and out.startswith("The quick brown")
    code, out, _ = _run(capsys, "generate", "--model", q, "--prompts", prompts, "--gen-len", "4",
                        "--policy", "ap4-3", "--chat", "vicuna", "--task", "iwslt")
    assert code == 0 and out.count("USER: Translate the following German text into English.") == len(PROMPTS)

    code, out, _ = _run(capsys, "quality", "--model", q, "--policy", "ap4,ap3,ap4-4@2-3",
                        "--prompts", prompts, "--gen-len", "6")
    assert code == 0 and "against the references" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert set(rows) == {"ap4", "ap3", "ap4-4@2-3"} and rows["ap3"][-1] == "3.00"

    code, out, err = _run(capsys, "evaluate", "--model", q, "--prompts", prompts, "--gen-len", "6",
                          "--policies", "fp16,ap4,ap3", "--schedulers", "static,learned,random",
                          "--hw", "h200-sxm", "--out", str(work / "eval"))
    assert code == 0, err
    assert "skipped learned" in out and "| static |" in out and "| learned |" not in out
    choices = json.loads((work / "eval" / "choices.json").read_text())
    assert choices["skipped"]["schedulers"] == ["learned"] and choices["config"]["test_samples"] == 3


def test_group_checkpoint_and_policies_it_cannot_serve(work: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    q = str(work / "w4")
    assert _run(capsys, "quantize", "--model", str(work / "hf"), "--policy", "w4g64", "--out", q)[0] == 0
    code, out, _ = _run(capsys, "generate", "--model", q, "--prompt", "Hello", "--gen-len", "3")
    assert code == 0 and out.startswith("Hello")
    code, _, err = _run(capsys, "generate", "--model", q, "--prompt", "Hello", "--policy", "w3g64")
    assert code == 2 and "does not match the folder's 4-bit group weights" in err
    ap = work / "ap4"
    if ap.exists():  # made by the test above
        code, _, err = _run(capsys, "generate", "--model", str(ap), "--prompt", "Hi", "--policy", "ap5")
        assert code == 2 and "reads [5]-bit anyprec weights; the folder stores an any-precision 4-bit" in err


def test_bad_inputs_each_get_one_clear_error(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hf = work / "hf"
    bare = work / "bare"  # weights but no tokenizer
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).symlink_to(hf / name)
    code, _, err = _run(capsys, "generate", "--model", str(bare), "--prompt", "x")
    assert code == 2 and f"{bare}: no tokenizer (expected tokenizer.json or tokenizer.model)" in err

    bad = work / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n\n{"prompt": "cut\n')
    code, _, err = _run(capsys, "quality", "--model", str(hf), "--policy", "w4", "--prompts", str(bad))
    assert code == 2 and f"{bad}:3: not JSON" in err
    bad.write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    code, _, err = _run(capsys, "evaluate", "--model", str(hf), "--prompts", str(bad),
                        "--out", str(work / "e"))
    assert code == 2 and f"{bad}:2: expected a JSON object with a string 'prompt'" in err

    long = work / "long.jsonl"  # the config's max_position_embeddings is 256
    long.write_text(json.dumps({"prompt": "short"}) + "\n" + json.dumps({"prompt": "word " * 300}) + "\n")
    code, _, err = _run(capsys, "generate", "--model", str(hf), "--prompts", str(long), "--gen-len", "8")
    assert code == 2 and f"{long}:2: the prompt is" in err and "context of 256 tokens" in err


def test_a_header_that_does_not_match_its_tensors(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    q = work / "w8"
    assert _run(capsys, "quantize", "--model", str(work / "hf"), "--policy", "w8", "--out", str(q))[0] == 0
    header_path = q / "quantization.json"
    good = header_path.read_text()
    header = json.loads(good)
    header["tensors"]["layers.1.down.scales"]["shape"] = [64, 3]
    header_path.write_text(json.dumps(header))
    code, _, err = _run(capsys, "generate", "--model", str(q), "--prompt", "Hi", "--gen-len", "2")
    assert code == 2 and "tensor 'layers.1.down.scales'" in err
    header = json.loads(good)
    del header["tensors"]["layers.0.o.qweight"]
    header_path.write_text(json.dumps(header))
    code, _, err = _run(capsys, "generate", "--model", str(q), "--prompt", "Hi", "--gen-len", "2")
    assert code == 2 and "tensor 'layers.0.o.qweight'" in err
    shutil.rmtree(q)
