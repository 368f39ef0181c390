"""`mpsim models` prints each preset's parameter count and the GPUs it needs per policy and GPU."""

from __future__ import annotations

import pytest

from mpsim.cli import main


def test_models_table_gives_params_and_gpus_needed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "llama-3-70b" in out and "70.55B" in out and "32.76B" in out
    header = next(line for line in out.splitlines() if line.startswith("model ") and "h100-sxm" in line)
    columns = header.split()[2:]
    table = [line.split() for line in out.splitlines()[out.splitlines().index(header):]]
    rows = {tuple(w[:2]): w[2:] for w in table if w[:1] in (["llama-2-70b"], ["llama-3-8b"])}
    need = dict(zip(columns, rows[("llama-2-70b", "fp16")], strict=True))
    # by hand (tests/core/test_multi_gpu_presets.py): 70.3 GB per GPU at TP 2 <= 72 GB; 35.5 GB at TP 4
    # <= 43.2 GB of an L40S; an RTX 4090 (24 GB, 21.6 usable) needs 8 (18.1 GB each at TP 8)
    assert (need["h100-sxm"], need["l40s"], need["rtx-4090"]) == ("2", "4", "8")
    assert rows[("llama-2-70b", "w4")][columns.index("h100-sxm")] == "1"
    assert set(rows[("llama-3-8b", "fp16")]) == {"1"}


def test_models_table_counts_fp8_and_fp4_by_their_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    """fp8 weights (1 B + one fp32 a tensor) and an fp8 cache need no more GPUs than w8 (8.25 bits a
    weight with its group scales, int8 KV with per-token scales), nvfp4 no more than fp8."""
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("model ") and "h100-sxm" in line)
    table = [line.split() for line in lines[lines.index(header) + 1:]]
    need = {tuple(w[:2]): [int(c) if c != "-" else 99 for c in w[2:]] for w in table if len(w) > 2}
    models = {m for m, _ in need}
    for m in models:
        fp8, w8, nvfp4 = need[(m, "fp8+kv8f")], need[(m, "w8")], need[(m, "nvfp4")]
        assert all(a <= b for a, b in zip(fp8, w8, strict=True))
        assert all(a <= b for a, b in zip(nvfp4, fp8, strict=True))
    # by hand: llama-2-70b's decoder linears 80 x 855.6M x 1 B = 68.4 GB, fp16 embeddings and lm_head
    # 1.05 GB, fp8 KV of 4096 tokens 0.67 GB, activations ~0.6 GB: ~70.8 GB <= 72 GB of one H100
    h100 = header.split()[2:].index("h100-sxm")
    assert (need[("llama-2-70b", "fp16")][h100], need[("llama-2-70b", "fp8+kv8f")][h100]) == (2, 1)
