"""The tile-edge step command (analysis/validation/tile_steps.py): measured steps from repeated rows,
the fixed-seed choice of shapes to price, the simulated steps, and a missing ground truth or marker."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.validation import tile_steps


def _rows(times: dict[tuple[int, int, int], list[float]], cls: str = "gemm fp8") -> pd.DataFrame:
    out = [{"n": n, "k": k, "m": m, "measured_us": t, "cls": cls, "status": "ok"}
           for (n, k, m), ts in times.items() for t in ts]
    return pd.DataFrame(out)


def test_measured_steps_take_the_median_of_repeats_and_skip_lone_edges() -> None:
    rows = _rows({(4096, 4096, 256): [10.0, 10.0, 40.0], (4096, 4096, 257): [20.0],
                  (2048, 4096, 256): [5.0], (2048, 4096, 257): [7.5],
                  (2048, 4096, 512): [9.0]})  # 513 unpublished: no step at 512
    rows.loc[len(rows)] = {"n": 2048, "k": 4096, "m": 257, "measured_us": 1.0, "cls": "gemm fp8",
                           "status": "skipped: outside selection fp8"}
    steps = tile_steps.measured_steps(rows, "gemm fp8")
    assert list(steps) == [256]
    assert steps[256].loc[(4096, 4096)] == 2.0 and steps[256].loc[(2048, 4096)] == 1.5
    assert tile_steps.measured_steps(rows, "gemm nvfp4") == {}


def test_chosen_rows_keep_one_row_per_shape_and_m_for_at_most_pairs_shapes() -> None:
    times = {(n, 1024, m): [1.0, 1.1] for n in (1024, 2048, 3072, 4096) for m in (64, 65)}
    rows = _rows(times)
    steps = tile_steps.measured_steps(rows, "gemm fp8")
    keep = tile_steps.chosen_rows(rows, "gemm fp8", steps, pairs=3)
    kept = rows[keep]
    assert len(kept) == 6 and kept.groupby(["n", "m"]).size().eq(1).all()
    assert all(sorted(g) == [64, 65] for _, g in kept.groupby("n")["m"])
    assert keep.equals(tile_steps.chosen_rows(rows, "gemm fp8", steps, pairs=3))  # fixed seed


def test_simulated_steps_from_the_priced_rows() -> None:
    f = pd.DataFrame({"n": [8, 8, 16, 16, 16], "k": 8, "m": [128, 129, 128, 129, 1024],
                      "predicted_us": [2.0, 3.0, 4.0, 8.0, 9.0], "status": "ok"})
    assert tile_steps.simulated_steps(f) == {128: (1.75, 2)}


def test_absent_tables_skip_and_a_doc_without_the_marker_fails(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert tile_steps.main(["--groundtruth", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="validation:tile-steps"):
        tile_steps.main(["--groundtruth", str(tmp_path), "--doc", str(doc)])
