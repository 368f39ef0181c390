"""analysis/bench/kernels.py: its table logic on CPU (--dry-run, interpreter, tiny shapes)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from mpsim.analysis.bench import kernels as bench_kernels
from mpsim.analysis.bench.timing import Timing, summarize


def test_dry_run_writes_one_row_per_format_and_baseline(tmp_path: Path) -> None:
    out = tmp_path / "bench.csv"
    rc = bench_kernels.main(["--dry-run", "--out", str(out), "--modules", "o", "down",
                             "--rows", "1", "16", "--repeats", "1", "--warmup", "0",
                             "--no-attention"])
    assert rc == 0
    rows = list(csv.DictReader(out.open()))
    # per module and M: torch, every format, at M = 1 every format's plain-loop twin, and a
    # 2-byte-scales twin of every config that reads scale-zero words (docs/kernels.md#staged-scales)
    twins = 0
    for key, impl in (("sz_words", "triton-2byte-scales"), ("lut_words", "triton-fp16-lut")):
        words = [r for r in rows if r["impl"] == "triton" and f'"{key}"' in r["config"]]
        loads2 = [r for r in rows if r["impl"] == impl]
        assert {(r["module"], r["m"], r["format"]) for r in loads2} == {
            (r["module"], r["m"], r["format"]) for r in words}
        assert any(r["m"] == "16" for r in loads2) and f'"{key}"' not in "".join(r["config"] for r in loads2)
        twins += len(words)
    assert len(rows) == 2 * (2 * (1 + len(bench_kernels.FORMATS)) + len(bench_kernels.FORMATS)) + twins
    assert {r["module"] for r in rows} == {"o", "down"}
    plain = [r for r in rows if r["impl"] == "triton-plain-loop"]
    assert {r["m"] for r in plain} == {"1"} and '"loop_stages"' not in "".join(r["config"] for r in plain)
    torch_rows = [r for r in rows if r["impl"] == "torch"]
    assert len(torch_rows) == 4 and all(float(r["speedup_vs_torch_fp16"]) == 1 for r in torch_rows)
    by = {(r["module"], r["m"], r["impl"], r["format"]): r for r in rows}
    down4 = by[("down", "16", "triton", "int4-g128")]
    assert down4["kernel"] == "gemv_group_kernel" and '"split_k"' in down4["config"]
    assert int(down4["weight_bytes"]) < int(by[("down", "16", "triton", "fp16")]["weight_bytes"])
    assert all(r["device"] == "cpu (interpreter)" and r["triton_version"] for r in rows)


def test_table_row_bandwidth_follows_the_format_bytes() -> None:
    n, k, m = 4096, 4096, 1
    t = Timing(10.0, 9.0, 11.0, 5, "test")
    copy = Timing(5.0, 5.0, 5.0, 5, "test")
    fmt = bench_kernels.FORMATS[2]  # int4, group 128
    assert fmt.bits == 4 and fmt.group_size == 128
    row = bench_kernels.table_row({"m": m, "n": n, "k": k}, fmt, "triton", "gemv_group_kernel",
                                  "{}", t, copy, Timing(20.0, 20.0, 20.0, 5, "test"))
    weight = n * k // 2 + n * (k // 128) * 4  # docs/formats.md: codes + an fp16 scale and zero
    moved = weight + m * k * 2 + m * n * 2  # + x read + y written
    assert row["weight_bytes"] == weight and row["bytes_moved"] == moved
    assert row["achieved_GBps"] == pytest.approx(moved / 10.0 / 1e3)
    assert row["copy_GBps"] == pytest.approx(2 * weight / 5.0 / 1e3)
    assert (row["fraction_of_copy"], row["speedup_vs_torch_fp16"]) == (0.5, 2.0)


def test_summarize_takes_medians_and_nearest_rank_percentiles() -> None:
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0, 100.0, 6.0, 7.0, 8.0, 9.0], "x")
    assert (t.median_us, t.p10_us, t.p90_us, t.repeats) == (5.5, 2.0, 100.0, 10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_without_cuda_it_says_so_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_kernels.main(["--out", "/nonexistent/never.csv"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
