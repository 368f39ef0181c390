"""The disagreement between two published GEMM tables of one GPU (analysis/validation/stack_noise.py),
on a small tree made here, with numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.validation import stack_noise
from mpsim.errors import MpsimInputError


def _table(root: Path, gpu: str, fw: str, ver: str, rows: list[tuple[str, int, int, int, float]]) -> None:
    d = root / "aiconfigurator" / gpu / "gemm" / fw / ver
    d.mkdir(parents=True)
    pd.DataFrame(rows, columns=["gemm_dtype", "m", "n", "k", "latency"]).to_parquet(d / "gemm_perf.parquet")


def _tree(tmp_path: Path) -> Path:
    # latencies in ms; file b is 10% above a at M 8, 20% below at M 300, 5% above at M 9000
    _table(tmp_path, "gpu_x", "vllm", "1.0", [
        ("bfloat16", 8, 64, 64, 0.010), ("bfloat16", 300, 64, 64, 0.020),
        ("bfloat16", 9000, 64, 64, 0.040), ("bfloat16", 16, 64, 64, 0.5),  # only in a: not joined
        ("fp8", 8, 64, 64, 0.001)])                                           # not bf16: ignored
    _table(tmp_path, "gpu_x", "trtllm", "2.0", [
        ("bfloat16", 8, 64, 64, 0.011), ("bfloat16", 300, 64, 64, 0.016),
        ("bfloat16", 9000, 64, 64, 0.042), ("fp8", 8, 64, 64, 0.1)])
    return tmp_path


def test_pairs_join_on_shape_and_band_by_m(tmp_path: Path) -> None:
    t = stack_noise.noise_table(_tree(tmp_path)).set_index("M band")
    assert set(t["a"]) == {"trtllm 2.0"} and set(t["b"]) == {"vllm 1.0"}  # sorted names: a first
    # |b - a| / a with a = trtllm: M 8: |10 - 11| / 11, M 300: |20 - 16| / 16, M 9000: |40 - 42| / 42
    assert t.loc["1-16", "MAPE %"] == pytest.approx(100 / 11)
    assert t.loc["257-8192", "MAPE %"] == pytest.approx(25.0)
    assert t.loc[">8192", "MAPE %"] == pytest.approx(100 * 2 / 42)
    assert "17-256" not in t.index
    assert t.loc["all", "shapes"] == 3
    assert t.loc["all", "MAPE %"] == pytest.approx((100 / 11 + 25.0 + 100 * 2 / 42) / 3)
    assert t.loc["all", "median %"] == pytest.approx(100 / 11)


def test_doc_block_is_replaced_in_place(tmp_path: Path) -> None:
    t = stack_noise.noise_table(_tree(tmp_path / "gt"))
    doc = tmp_path / "v.md"
    doc.write_text("# V\n\nintro\n", encoding="utf-8")
    stack_noise.write_doc(doc, t)
    first = doc.read_text(encoding="utf-8")
    assert first.count(stack_noise.BEGIN) == 1 and stack_noise.HEADING in first
    doc.write_text(first + "\nafter\n", encoding="utf-8")
    stack_noise.write_doc(doc, t)
    again = doc.read_text(encoding="utf-8")
    assert again.count(stack_noise.BEGIN) == 1 and again.endswith("\nafter\n")
    assert "| gpu_x | trtllm 2.0 | vllm 1.0 | 257-8192 | 1 | 25.0 | 25.0 | 25.0 |" in again


def test_bad_trees_fail_with_the_path(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match="no <gpu>/gemm"):
        stack_noise.noise_table(tmp_path)
    _table(tmp_path, "gpu_y", "vllm", "1.0", [("fp8", 8, 64, 64, 0.001)])
    with pytest.raises(MpsimInputError, match=r"gemm_perf\.parquet: no bfloat16 rows"):
        stack_noise.noise_table(tmp_path)
    bad = tmp_path / "aiconfigurator" / "gpu_y" / "gemm" / "vllm" / "1.0" / "gemm_perf.parquet"
    pd.DataFrame({"gemm_dtype": ["bfloat16"], "m": [1], "n": [2], "k": [3]}).to_parquet(bad)
    with pytest.raises(MpsimInputError, match=r"gemm_perf\.parquet: no column\(s\) \['latency'\]"):
        stack_noise.noise_table(tmp_path)
