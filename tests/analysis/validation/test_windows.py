"""The sliding-window table command (analysis/validation/windows.py) on a small made-up tree: its
block, by covers/binds, the rooms' reasons, bad arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation import windows

SOURCE = {"vllm": "vllm_flash_attn_fa3", "trtllm": "torch_flow"}


def _rows(framework: str) -> pd.DataFrame:
    """Decode rows at 1024 cached keys: window 0, a covering window (2048) and a binding one (128)."""
    batch = np.array([1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64])
    return pd.DataFrame({
        "framework": framework, "version": "1.0", "device": "NVIDIA GPU",
        "op_name": "generation_attention", "kernel_source": SOURCE[framework], "batch_size": batch,
        "isl": 1, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
        "window_size": [0] * 4 + [2048] * 4 + [128] * 4, "beam_width": 1, "attn_dtype": "bfloat16",
        "kv_cache_dtype": "bfloat16", "step": 1023, "latency": 0.012 + batch * 1e-3})


def test_the_block_prices_covering_windows_everywhere_and_binding_ones_by_room(tmp_path: Path) -> None:
    for framework, gpu in (("vllm", "h200_sxm"), ("trtllm", "l40s")):
        folder = tmp_path / "gt" / "aiconfigurator" / gpu / "attention" / framework / "1.0"
        folder.mkdir(parents=True)
        _rows(framework).to_parquet(folder / "generation_attention_perf.parquet")
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- validation:windows -->\nOLD\n<!-- /validation:windows -->\nend\n")
    assert windows.main(["--groundtruth", str(tmp_path / "gt"), "--sample", "6", "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "OLD" not in text and text.startswith("intro\n") and text.endswith("end\n")
    assert "at most **6 a table**" in text
    lines = {tuple(c.strip() for c in line.split("|")[1:6]): line.split("|")[6:9]
             for line in text.splitlines() if line.startswith(("| H200 SXM |", "| L40S |"))}
    # (GPU, stack, class, window, kv) -> rows, unrepresentable, reason; 6 of 8 window rows drawn
    assert sum(int(v[0]) for v in lines.values()) == 12
    vllm_binds = lines[("H200 SXM", "vllm 1.0", "attention decode kv16", "128", "binds")]
    assert vllm_binds[1].strip() == "0"  # FA3 prices a binding window
    trt_binds = lines[("L40S", "trtllm 1.0", "attention decode kv16", "128", "binds")]
    assert trt_binds[1].strip() == "0" and not trt_binds[2].strip()  # TensorRT-LLM's Ada room's
    # decode kernels price it too (stop 46); its context FMHA refuses one (tests/sim)
    assert lines[("L40S", "trtllm 1.0", "attention decode kv16", "2048", "covers")][1].strip() == "0"


def test_bad_arguments_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert windows.run(lambda: windows.main(["--groundtruth", str(tmp_path), "--sample", "0"])) == 2
    assert "--sample must be >= 1, got 0" in capsys.readouterr().err
    assert windows.run(lambda: windows.main(["--groundtruth", str(tmp_path)])) == 2
    assert "no aiconfigurator/ folder" in capsys.readouterr().err
    (tmp_path / "aiconfigurator").mkdir()
    assert windows.run(lambda: windows.main(["--groundtruth", str(tmp_path)])) == 2
    assert "no aiconfigurator attention tables" in capsys.readouterr().err
