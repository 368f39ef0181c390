"""The GEMM output-rate command (analysis/validation/write_rates.py): which rows are output-bound,
their bytes and size bins, the fixed-seed choice priced, one file's table lines, and a missing
ground truth or marker."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.validation import write_rates

GT = Path(__file__).resolve().parents[3] / ".." / "shared" / "groundtruth"


def _rows(shapes: list[tuple[int, int, int]], cls: str = "gemm bf16") -> pd.DataFrame:
    return pd.DataFrame([{"m": m, "n": n, "k": k, "measured_us": 10.0, "cls": cls, "status": "ok"}
                         for m, n, k in shapes])


def test_output_rows_are_bf16_with_small_k_and_wide_outputs() -> None:
    rows = _rows([(4096, 4096, 32), (4096, 4096, 128), (128, 4096, 32), (4096, 4096, 64)])
    rows.loc[3, "status"] = "skipped: outside selection stacks"
    assert write_rates.output_rows(rows).tolist() == [True, False, False, False]
    assert not write_rates.output_rows(_rows([(4096, 4096, 32)], "gemm fp8")).any()


def test_bytes_and_bins() -> None:
    rows = _rows([(4096, 4096, 32), (8192, 8192, 32), (2048, 2048, 32), (65536, 16384, 64)])
    assert write_rates.moved_bytes(rows).iloc[0] == 2 * (4096 * 4096 + 8192 * 32)
    # 32 MiB sits in 8-32, 128 MiB in 96-256, 8 MiB in no bin (the bins start above 8), 2 GiB above 1024
    bins = write_rates.size_bin(rows).astype(object).tolist()
    assert bins[0] == "8-32" and bins[1] == "96-256" and pd.isna(bins[2]) and bins[3] == ">1024"


def test_chosen_keeps_at_most_rows_per_bin_with_a_fixed_seed() -> None:
    rows = _rows([(4096, n, 32) for n in range(2048, 4097, 256)] + [(8192, 16384, 32)] * 3)
    keep = write_rates.chosen(rows, 2)
    kept = rows[keep]
    assert kept.groupby(write_rates.size_bin(kept), observed=True).size().max() == 2
    assert len(kept) == 4 and keep.equals(write_rates.chosen(rows, 2))


def test_one_file_lines_measured_and_simulated() -> None:
    path = GT / "aiconfigurator" / "h200_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared/groundtruth: docs/validation.md#the-data)")
    lines = write_rates._one((("H200", "h200_sxm", "h200-sxm", "vllm", "0.24.0"), path, 1))
    assert len(lines) == 6 and all(line.startswith("| H200 | vllm 0.24.0 | ") for line in lines)
    cells = [line.strip("|").split("|") for line in lines]
    assert all(int(c[9]) == 1 for c in cells)                      # one row priced per bin
    assert all(0.1 < float(c[5]) < 1.0 and 0.1 < float(c[8]) < 1.0 for c in cells)  # of 4.8 TB/s


def test_absent_tables_skip_and_a_doc_without_the_marker_fails(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert write_rates.main(["--groundtruth", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().err
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="validation:write-rates"):
        write_rates.main(["--groundtruth", str(tmp_path), "--doc", str(doc)])
