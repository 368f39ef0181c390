"""The CLI as a user meets it: happy paths print tables; bad input is one clear line, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.cli import main


def mpsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mpsim.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def fp16_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "fp16.parquet"
    assert main(["synth", "--model", "vicuna-7b", "--policy", "fp16", "--prompt-len", "64",
                 "--gen-len", "4", "--out", str(path)]) == 0
    return path


def test_synth_then_roofline(fp16_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    timeline = tmp_path / "tl.json"
    assert main(["roofline", str(fp16_trace), "--hw", "h200-sxm", "--timeline", str(timeline),
                 "--out", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "TTFT" in out and "tokens/s" in out and "gemm" in out
    assert timeline.stat().st_size > 1000


def test_info_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "list"]) == 0
    assert main(["hw", "show", "h100-sxm"]) == 0
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "npu-edge" in out and "3350" in out and "qwen2.5-1.5b" in out


def _assert_clean_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_truncated_trace(fp16_trace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cut.parquet"
    bad.write_bytes(fp16_trace.read_bytes()[:5000])
    _assert_clean_error(mpsim("roofline", str(bad), "--hw", "h200-sxm"), "cut.parquet", "Parquet")


def test_trace_missing_column(fp16_trace: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(fp16_trace)
    bad = tmp_path / "nocol.parquet"
    pq.write_table(table.drop(["kv_len"]), bad)
    _assert_clean_error(mpsim("roofline", str(bad), "--hw", "h200-sxm"), "nocol.parquet", "kv_len")


def test_negative_dimension(fp16_trace: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(fp16_trace)
    frame = table.to_pandas()
    frame.loc[3, "k"] = -1
    bad = tmp_path / "neg.parquet"
    pq.write_table(table.from_pandas(frame, preserve_index=False).replace_schema_metadata(
        table.schema.metadata), bad)
    _assert_clean_error(mpsim("roofline", str(bad), "--hw", "h200-sxm"), "row 3", "'k'", "-1")


def test_unknown_policy() -> None:
    _assert_clean_error(mpsim("synth", "--model", "vicuna-7b", "--policy", "w5", "--prompt-len", "8",
                              "--gen-len", "2", "--out", "/tmp/never.parquet"), "'w5'", "Grammar")


def test_unknown_model() -> None:
    _assert_clean_error(mpsim("synth", "--model", "gpt-9", "--policy", "w4", "--prompt-len", "8",
                              "--gen-len", "2", "--out", "/tmp/never.parquet"), "gpt-9", "vicuna-7b")


@pytest.mark.parametrize(("edit", "needle"), [
    ("  bandwidth_GBps: 4800\n", "dram.bandwidth_GBps"),
    ("  bandwidth_GBps: -4800\n", "dram.bandwidth_GBps"),
])
def test_bad_hardware_file(fp16_trace: Path, tmp_path: Path, edit: str, needle: str) -> None:
    from importlib.resources import files

    text = (files("mpsim.hw_models") / "h200-sxm.yaml").read_text()
    dram = text.index("\ndram:")
    head, tail = text[:dram], text[dram:]
    replacement = "" if "-" not in edit else edit
    assert "  bandwidth_GBps: 4800\n" in tail
    bad = tmp_path / "myhw.yaml"
    bad.write_text(head + tail.replace("  bandwidth_GBps: 4800\n", replacement, 1))
    _assert_clean_error(mpsim("roofline", str(fp16_trace), "--hw", str(bad)), "myhw.yaml", needle)


def test_capture_needs_weights_or_dummy() -> None:
    _assert_clean_error(mpsim("capture", "--model", "vicuna-7b", "--policy", "w4", "--prompt-len", "8",
                              "--gen-len", "2", "--out", "/tmp/never.parquet"), "--weights DIR or --dummy")
