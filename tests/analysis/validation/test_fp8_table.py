"""The FP8/FP4 GEMM table command (analysis/validation/fp8_table.py): its rows by hand, its bar
verdicts, and a missing ground truth or doc marker."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.validation import fp8_table


def _frame(cls: str, ms: list[int], pred: list[float], roof: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"status": "ok", "cls": cls, "m": ms, "predicted_us": pred,
                         "measured_us": 10.0, "roofline_us": roof})


def test_rows_per_band_with_the_bar_verdicts() -> None:
    f = _frame("gemm fp8", [4, 8, 300], [10.5, 9.5, 12.0], [5.0, 5.0, 5.0])
    rows = fp8_table.lines("H200", "vllm 0.24.0", f)
    assert rows[0] == "| H200 | vllm 0.24.0 | gemm fp8 | 1-16 | 2 | 5.0 | 5.0 | +0.0 | 50.0 | yes |"
    assert rows[1].endswith("| 257-8192 | 1 | 20.0 | 20.0 | +20.0 | 50.0 | **no** |")
    assert rows[2].startswith("| H200 | vllm 0.24.0 | gemm fp8 | all | 3 | 10.0 |")
    host = fp8_table.lines("H100", "vllm 0.24.0", _frame("gemm fp8_block", [2], [10.3], [10.3]))
    assert host[0].endswith("| yes, ties the roofline (host-bound) |")
    b200 = fp8_table.lines("B200", "vllm 0.24.0", _frame("gemm fp8", [2], [30.0], [5.0]))
    assert "gemm fp8 (outside the bar)" in b200[0] and b200[0].endswith("| – |")
    assert fp8_table.lines("H200", "x", _frame("gemm bf16", [2], [1.0], [1.0])) == []


def test_absent_tables_skip_and_a_doc_without_the_marker_fails(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert fp8_table.main(["--groundtruth", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="validation:fp8"):
        fp8_table.main(["--groundtruth", str(tmp_path), "--doc", str(doc)])
