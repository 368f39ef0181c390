"""`mpsim validate --against` and `mpsim calibrate --against` as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from groundtruth_cases import AIC, needs_groundtruth

from mpsim.cli import main

GENERIC = ["op", "m", "n", "k", "w_format", "w_bits", "group_size", "batch", "q_len", "kv_len",
           "heads", "kv_heads", "head_dim", "kv_bits", "tokens", "hidden", "measured_us", "protocol",
           "includes"]
OUT = ["predicted_us", "roofline_us", "error", "config", "status"]


@pytest.fixture
def hand_written(tmp_path: Path) -> Path:
    """gemm and attention rows, a kv_append row and an unrepresentable row, as a person writes them."""
    path = tmp_path / "measured.csv"
    path.write_text("\n".join([
        ",".join(GENERIC),
        "gemm,1,4096,4096,fp16,16,,,,,,,,,,,14.1,graph,",
        "gemm,64,11008,4096,int4-group,4,128,,,,,,,,,,41.0,kernel,",
        "attention,,,,,,,8,1,2048,32,8,128,16,,,21.5,graph,kv_append",
        "attention,,,,,,,1,512,512,32,32,128,16,,,60.0,eager,",
        "attention,,,,,,,1,1,1024,32,8,128,2,,,12.0,graph,",   # 2-bit KV: unrepresentable
        "rmsnorm,,,,,,,,,,,,,,8,4096,3.0,kernel,",
    ]) + "\n")
    return path


def test_validate_against_a_hand_written_csv_on_a100(hand_written: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.csv"
    assert main(["validate", "--against", str(hand_written), "--hw", "a100-sxm-80gb", "--out", str(out),
                 "--no-cache"]) == 0
    rows = pd.read_csv(out, keep_default_na=False)
    assert list(rows.columns) == GENERIC + OUT  # exactly: the input columns, then the five
    assert list(rows["measured_us"]) == [14.1, 41.0, 21.5, 60.0, 12.0, 3.0]  # input order
    assert rows["status"].tolist()[:4] == ["ok"] * 4 and rows["status"].iloc[5] == "ok"
    assert rows["status"].iloc[4].startswith("unrepresentable: kv_bits 2")
    assert rows["predicted_us"].iloc[4] == "" and rows["config"].iloc[4] == ""
    assert '"kernel":"fa3_decode"' in rows["config"].iloc[2] and '"kv_append":1' in rows["config"].iloc[2]
    assert '"kernel":"cublas_gemm"' in rows["config"].iloc[0]
    text = capsys.readouterr().out
    assert "1 of 6 rows not predicted" in text and "attention decode kv16" in text
    assert not list(tmp_path.glob("*.png"))  # no plot unless --plot


def test_validate_needs_exactly_one_input(hand_written: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--hw", "h200-sxm"]) == 2
    assert main(["validate", "x.parquet", "--against", str(hand_written), "--hw", "h200-sxm"]) == 2
    assert "one of them" in capsys.readouterr().err


def test_malformed_csv_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("op,m,n,k,w_format,w_bits,measured_us,protocol\ngemm,1,64,64,int4-group,3,2.0,graph\n")
    assert main(["validate", "--against", str(path), "--hw", "h200-sxm", "--no-cache"]) == 2
    assert "row 1, column 'w_bits': 3 disagrees with w_format 'int4-group'" in capsys.readouterr().err


@needs_groundtruth
def test_validate_a_published_table_with_summary_and_plot(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    table = AIC / "h100_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet"
    summary, plot, rows = tmp_path / "s.csv", tmp_path / "p.png", tmp_path / "r.csv"
    assert main(["validate", "--against", str(table), "--hw", "h100-sxm", "--select", "issue11",
                 "--summary", str(summary), "--plot", str(plot), "--out", str(rows),
                 "--cache-dir", str(tmp_path / "memo")]) == 0
    s = pd.read_csv(summary)
    allrows = s[(s["band"] == "all") & (s["model"] == "simulator")].set_index("cls")
    assert allrows.loc["attention decode kv16", "count"] == 68
    assert allrows.loc["attention decode fp8-kv", "count"] == 68
    r = pd.read_csv(rows, low_memory=False)
    assert len(r) == len(pd.read_parquet(table)) and list(r.columns[-5:]) == OUT
    assert (r["status"] == "ok").sum() == 136 and plot.read_bytes()[:4] == b"\x89PNG"
    assert "skipped: outside selection issue11" in capsys.readouterr().out


def test_calibrate_against_writes_constants_and_cross_device_errors(
        hand_written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from mpsim.analysis.validation import calibration as cal

    monkeypatch.setattr(cal, "BW_GRID", np.array([0.8, 0.9]))
    monkeypatch.setattr(cal, "L2_SCALES", np.array([1.0]))
    monkeypatch.setattr(cal, "GOLDEN_STEPS", 3)
    out = tmp_path / "cal.yaml"
    bigger = tmp_path / "bigger.csv"  # at least as many fitted rows as constants fitted
    extra = [f"gemm,{m},{n},4096,fp16,16,,,,,,,,,,,{6 + m / 10 + n / 900:.2f},{p},"
             for m, n, p in ((2, 4096, "kernel"), (8, 2048, "graph"), (16, 8192, "kernel"),
                             (32, 4096, "graph"), (4, 11008, "kernel"), (64, 2048, "graph"),
                             (128, 4096, "kernel"), (1, 2048, "graph"))]
    bigger.write_text(hand_written.read_text() + "\n".join(extra) + "\n")
    assert main(["calibrate", "--against", str(bigger), "--hw", "h200-sxm", "--out", str(out),
                 "--fit-rows", "7", "--predict", f"h100-sxm={hand_written}"]) == 0
    text = capsys.readouterr().out
    assert "in_sample" in text and "held_out" in text and "cross_device h100-sxm" in text
    assert main(["validate", "--against", str(hand_written), "--hw", "h100-sxm", "--calibration",
                 str(out), "--no-cache"]) == 0
    assert f"with {out}" in capsys.readouterr().out
    assert main(["calibrate", "--against", str(hand_written), "--hw", "h200-sxm", "--out", str(out),
                 "--predict", "h100-sxm"]) == 2
