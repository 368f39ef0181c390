"""analysis/bench/cli.py: its runs and table on tiny workloads (--quick), against itself."""

from __future__ import annotations

import csv
from pathlib import Path

from mpsim.analysis.bench import cli


def test_quick_run_times_every_case_as_a_child_process(tmp_path: Path) -> None:
    out, doc = tmp_path / "cli.csv", tmp_path / "doc.md"
    doc.write_text(f"before\n{cli.BEGIN}\nold table\n{cli.END}\nafter\n")
    assert cli.main(["--quick", "--runs", "1", "--out", str(out), "--doc", str(doc)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["case"] for r in rows] == [c.name for c in cli.cases(False, cli.QUICK)]
    assert all(float(r["wall_s"]) > 0 and float(r["peak_rss_mb"]) > 10 for r in rows)
    text = doc.read_text()
    assert "old table" not in text and "mpsim op gemm" in text and text.endswith(f"{cli.END}\nafter\n")
