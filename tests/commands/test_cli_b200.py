"""The B200 file end to end through the CLI on a small case: hw list/show, synth tuned for it,
simulate, roofline and op gemm all run and report on b200-sxm."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsim.cli import main


def test_b200_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "list"]) == 0
    assert main(["hw", "show", "b200-sxm"]) == 0
    shown = capsys.readouterr().out
    assert "b200-sxm         gpu" in shown and "SMs 148" in shown and "8000 GB/s" in shown
    assert "assume-blackwell-sm-rate] (assumption)" in shown
    trace = tmp_path / "b200.parquet"
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "16",
                 "--gen-len", "2", "--hw", "b200-sxm", "--config", "best", "--out", str(trace)]) == 0
    assert "model-guided configs for b200-sxm" in capsys.readouterr().out
    assert main(["simulate", str(trace), "--hw", "b200-sxm", "--no-cache"]) == 0
    simulated = capsys.readouterr().out
    assert "b200-sxm" in simulated and "tokens/s" in simulated
    assert main(["roofline", str(trace), "--hw", "b200-sxm"]) == 0
    assert "roofline of b200.parquet on b200-sxm" in capsys.readouterr().out
    assert main(["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--hw", "b200-sxm"]) == 0
    assert main(["op", "gemm", "--m", "64", "--n", "4096", "--k", "4096", "--kernel", "cublas_gemm",
                 "--hw", "b200-sxm"]) == 0
    ops = capsys.readouterr().out
    # cuBLAS's Blackwell heuristic (not Hopper's): stream-K over the 148 SMs, an sm-100 config
    assert "gemm_fp16_kernel on b200-sxm" in ops and "cublas_gemm on b200-sxm  grid [148]" in ops
    assert '"sm": 100' in ops
