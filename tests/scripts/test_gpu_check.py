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
        "dependencies", "hardware probes", "compile check", "pytest -m gpu", "kernel benchmark",
        "attention benchmark",
        "capture vicuna-7b-fp16-b2", "validate vicuna-7b-fp16-b2",
        "capture vicuna-7b-w4_kv8-b2", "validate vicuna-7b-w4_kv8-b2",
        "capture vicuna-7b-w4-b2-tuned", "validate vicuna-7b-w4-b2-tuned",
        # batch 2 again with the group loops' 2-byte scale and zero loads (--two-byte-scales: w4)
        "capture vicuna-7b-w4-b2-2byte-scales", "validate vicuna-7b-w4-b2-2byte-scales",
        "gemlite benchmark"]
    assert all(s.split("|")[2].strip() == "0" for s in steps) and "DRY RUN" in summary
    assert len(pd.read_csv(out / "bench_kernels.csv")) and len(pd.read_csv(out / "bench_attention.csv"))
    gemlite = pd.read_csv(out / "bench_gemlite.csv")  # the rooms' prices; no GPU, so no times
    assert len(gemlite) == 8 and (gemlite["status"] == "dry run: no GPU").all()
    assert (gemlite["model_us"] <= gemlite["predicted_us"] * (1 + 1e-9)).all()
    compiled = pd.read_csv(out / "wgmma_check.csv", keep_default_na=False)  # this Triton, no GPU
    assert len(compiled) == 2 and (compiled["status"] == "ok").all() and (compiled["serialized"] == "").all()
    probes = pd.read_csv(out / "hw_probes.csv")  # fp8 needs a GPU: its rows say so; the rest ran
    assert set(probes.probe) == {"operands", "edge"} and (probes[probes.dtype != "fp8"].status == "ok").all()
    rows = pd.read_csv(out / "validate" / "vicuna-7b-w4_kv8-b2-rows.csv")
    assert list(rows.columns[-5:]) == ["predicted_us", "roofline_us", "error", "config", "status"]
    assert (rows["status"] == "ok").all()
    assert (out / "validate" / "vicuna-7b-w4_kv8-b2-summary.csv").is_file()
    configs = {name: pd.read_parquet(out / "captures" / f"vicuna-7b-w4-b2{name}.parquet")["config"]
               for name in ("-tuned", "-2byte-scales")}
    assert configs["-tuned"].str.contains('"sz_words"').any()
    assert not configs["-2byte-scales"].str.contains('"sz_words"').any()
    assert (out / "log.txt").is_file() and (tmp_path / "kit.tgz").stat().st_size > 1000
    assert not (out / ".site").exists()  # the scratch install is removed


def _kit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), "--dry-run", *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)


def test_steps_past_the_deadline_are_skipped_and_named(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    run = _kit(tmp_path, "--out", str(out), "--steps", "captures", "--policies", "fp16,w4",
               "--batches", "1", "--tuned", "", "--deadline", "5")
    summary = (out / "SUMMARY.md").read_text()
    assert run.returncode == 0, summary + run.stderr[-2000:]
    steps = [line.split("|")[1:3] for line in summary.splitlines()
             if line.startswith("| ") and "| step |" not in line]
    assert [(name.strip(), rc.strip()) for name, rc in steps] == [
        ("dependencies", "0"), ("capture vicuna-7b-fp16-b1", "skipped (deadline)"),
        ("capture vicuna-7b-w4-b1", "skipped (deadline)"),
        # batch 1 again with the one-row K loop unpipelined (--plain-loop's default fp16, w4)
        ("capture vicuna-7b-fp16-b1-plain-loop", "skipped (deadline)"),
        ("capture vicuna-7b-w4-b1-plain-loop", "skipped (deadline)")]
    assert "cut short or skipped: capture vicuna-7b-fp16-b1; capture vicuna-7b-w4-b1;" in summary


def test_a_step_over_its_time_box_keeps_its_output(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    # every module of the tiny model: ~15 s of interpreter, boxed to 8 (the CSV header comes at ~3)
    run = _kit(tmp_path, "--out", str(out), "--steps", "kernels", "--max-step", "8",
               "--bench-modules", "qkv,o,gate,up,gate_up,down,lm_head")
    summary = (out / "SUMMARY.md").read_text()
    assert run.returncode == 0, summary + run.stderr[-2000:]
    assert "| kernel benchmark | 124 |" in summary and "kernel benchmark;" in summary
    assert (out / "bench_kernels.csv").read_text().startswith("device,")  # the header, flushed


def test_unknown_step_is_refused(tmp_path: Path) -> None:
    run = _kit(tmp_path, "--out", str(tmp_path / "kit"), "--steps", "captures,bench")
    assert run.returncode == 2 and "--steps: unknown step 'bench'" in run.stderr
    assert "expected tests, kernels, attention, captures, gemlite" in run.stderr


def test_empty_policies_leave_the_tuned_captures_alone(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    run = _kit(tmp_path, "--out", str(out), "--steps", "captures", "--policies", "", "--batches", "1",
               "--tuned", "w4", "--plain-loop", "", "--deadline", "5")
    summary = (out / "SUMMARY.md").read_text()
    assert run.returncode == 0, summary
    names = [line.split("|")[1].strip() for line in summary.splitlines()
             if line.startswith("| ") and "| step |" not in line]
    assert names == ["dependencies", "capture vicuna-7b-w4-b1-tuned"]
