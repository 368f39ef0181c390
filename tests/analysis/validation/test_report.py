"""The validation report's markdown: bars judged per band, blocks replaced between their markers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.report import Report, add_effroof
from mpsim.analysis.validation.report_md import bars_block, render, write_doc


def _rows() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    parts = []
    for gpu in ("h200", "h100"):
        m = np.repeat([4, 64, 1024], 20)
        meas = rng.uniform(10, 100, len(m))
        # within 5% in the two small bands, 30% off in the large one
        pred = meas * np.where(m < 1000, 1.05, 1.3)
        parts.append(pd.DataFrame({
            "gpu": gpu, "source": "gemm", "cls": "gemm bf16",
            "band": np.where(m <= 16, "1-16", np.where(m <= 256, "17-256", "257-8192")),
            "m": m, "n": 4096, "k": 4096, "batch": np.nan, "q_len": np.nan, "kv_len": np.nan,
            "heads": np.nan, "kv_heads": np.nan, "tokens": np.nan, "hidden": np.nan,
            "measured_us": meas, "predicted_us": pred, "roofline_us": meas * 0.5,
            "t_math_us": meas * 0.3, "t_mem_us": meas * 0.4, "status": "ok", "protocol": "graph"}))
    rows = pd.concat(parts, ignore_index=True)
    norm = rows.iloc[:3].assign(cls="rmsnorm", band="1-16", m=pd.NA, n=pd.NA, k=pd.NA, tokens=4,
                                hidden=pd.array([4096, pd.NA, 4096], dtype="Int64"))
    return pd.concat([rows, norm], ignore_index=True)


def test_bars_fail_when_one_band_misses_and_blocks_land_between_markers(tmp_path: Path) -> None:
    rows = _rows()
    report = Report(rows, effroof=add_effroof(rows), noise=pd.DataFrame(
        [{"gpu": "h200", "shapes": 1, "mape_pct": 4.0, "median_pct": 2.0, "p90_pct": 9.0}]),
        calibration={"h200": {"in_sample": {"rows": 3, "before_mape_pct": 9.0, "after_mape_pct": 4.0,
                                            "roofline_mape_pct": 30.0}}},
        constants={"h200": "bandwidth fraction 0.8"}, timings={"predict": 1.0})
    bars = bars_block(rows)
    assert "| gemm bf16 | H200 |" in bars and "**no**" in bars  # the 257-8192 band is 30% off
    blocks = render(report)
    doc = tmp_path / "v.md"
    doc.write_text("intro\n" + "".join(f"<!-- validation:{k} -->\nOLDTEXT\n<!-- /validation:{k} -->\nkeep\n"
                                        for k in blocks if k != "summary")
                   + "<!-- validation:summary -->\n<!-- /validation:summary -->\nkeep\n")  # empty block
    write_doc(doc, blocks)
    text = doc.read_text()
    assert "OLDTEXT" not in text and text.count("keep") == len(blocks)
    assert "`trt-profiler`" in text and "30.0" in text
    (tmp_path / "bad.md").write_text("no markers\n")
    with pytest.raises(SystemExit, match="no <!-- validation:protocols -->"):
        write_doc(tmp_path / "bad.md", blocks)
