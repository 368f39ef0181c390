"""The fp8 tensor-power sensitivity bench (analysis/bench/fp8_power.py): its error table and markdown
by hand, a missing ground truth skipped with a reason, and bad factors refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.bench import fp8_power


def test_errors_band_the_priced_fp8_rows_and_leave_the_rest() -> None:
    frame = pd.DataFrame({"status": ["ok", "ok", "ok", "unrepresentable: x"],
                          "cls": ["gemm fp8", "gemm fp8_block", "gemm bf16", "gemm fp8"],
                          "m": [8, 512, 8, 8], "predicted_us": [11.0, 90.0, 5.0, 1.0],
                          "measured_us": [10.0, 100.0, 5.0, 2.0]})
    e = fp8_power.errors(frame)
    assert e["cls"].tolist() == ["gemm fp8", "gemm fp8_block"]
    assert e["band"].tolist() == ["1-16", ">256"]
    assert e["err"].tolist() == pytest.approx([0.1, -0.1])


def test_markdown_puts_each_factor_in_a_column() -> None:
    df = pd.DataFrame({"gpu": "h200-sxm", "stack": "vllm/0.24.0", "cls": "gemm fp8", "band": ">256",
                       "fp8_tensor_energy": [1.0, 1.3], "rows": 33, "mape": [14.0, 12.0],
                       "bias": [-10.6, 5.2]})
    text = fp8_power.markdown(df)
    assert "| x1 MAPE / bias | x1.3 MAPE / bias |" in text
    assert "| h200-sxm | vllm/0.24.0 | gemm fp8 | >256 | 33 | 14.0 / -10.6 | 12.0 / +5.2 |" in text


def test_missing_tables_skip_and_bad_factors_are_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert fp8_power.main(["--groundtruth", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 0
    assert "skipped" in capsys.readouterr().out and not (tmp_path / "x.csv").exists()
    with pytest.raises(SystemExit):
        fp8_power.main(["--factors", "1.0,abc"])
    with pytest.raises(SystemExit):
        fp8_power.main(["--factors", "0"])
