"""scripts/gpu-check.sh --dry-run: the GPU kit's every step on CPU at tiny shapes, into one folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_writes_every_output_and_passes(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--dry-run", "--out", str(out),
                          "--policies", "fp16,w4+kv8", "--batches", "2", "--tuned", "w4",
                          "--tar", str(tmp_path / "kit.tgz")],
                         capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path)
    summary = (out / "SUMMARY.md").read_text()
    assert run.returncode == 0, summary + run.stdout[-3000:]
    steps = [line for line in summary.splitlines() if line.startswith("| ") and "| step |" not in line]
    assert [s.split("|")[1].strip() for s in steps] == [
        "dependencies", "pytest -m gpu", "kernel benchmark", "attention benchmark",
        "capture vicuna-7b-fp16-b2", "validate vicuna-7b-fp16-b2",
        "capture vicuna-7b-w4_kv8-b2", "validate vicuna-7b-w4_kv8-b2",
        "capture vicuna-7b-w4-b2-tuned", "validate vicuna-7b-w4-b2-tuned"]
    assert all(s.split("|")[2].strip() == "0" for s in steps) and "DRY RUN" in summary
    assert len(pd.read_csv(out / "bench_kernels.csv")) and len(pd.read_csv(out / "bench_attention.csv"))
    rows = pd.read_csv(out / "validate" / "vicuna-7b-w4_kv8-b2-rows.csv")
    assert list(rows.columns[-5:]) == ["predicted_us", "roofline_us", "error", "config", "status"]
    assert (rows["status"] == "ok").all()
    assert (out / "validate" / "vicuna-7b-w4_kv8-b2-summary.csv").is_file()
    assert (out / "log.txt").is_file() and (tmp_path / "kit.tgz").stat().st_size > 1000
    assert not (out / ".site").exists()  # the scratch install is removed
