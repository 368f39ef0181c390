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
