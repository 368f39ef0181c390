"""analysis/bench/attention.py: its table logic on CPU (--dry-run, interpreter, tiny shapes)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from mpsim.analysis.bench import attention as ba
from mpsim.analysis.bench.timing import Timing


def test_dry_run_writes_every_format_and_the_sdpa_baseline(tmp_path: Path) -> None:
    out = tmp_path / "attn.csv"
    assert ba.main(["--dry-run", "--out", str(out), "--repeats", "1", "--warmup", "0"]) == 0
    rows = list(csv.DictReader(out.open()))
    shapes = 2 * len(ba.DRY_KV_LENS)  # batches (1, 2) x KV lengths
    assert len(rows) == shapes * (len(ba.KV_BITS) + 1)
    triton_rows = [r for r in rows if r["impl"] == "triton"]
    assert {r["kv_bits"] for r in triton_rows} == {"16", "8", "4"}
    assert all(r["kernel"] == "attention_decode_kernel" and '"split_k"' in r["config"]
               for r in triton_rows)
    fp16 = [r for r in triton_rows if r["kv_bits"] == "16"]
    assert all(float(r["speedup_vs_fp16_kv"]) == 1 for r in fp16)
    by = {(r["batch"], r["kv_len"], r["kv_bits"], r["impl"]): r for r in rows}
    assert int(by[("2", "100", "4", "triton")]["kv_bytes"]) < int(
        by[("2", "100", "8", "triton")]["kv_bytes"]) < int(by[("2", "100", "16", "triton")]["kv_bytes"])
    assert all(r["device"] == "cpu (interpreter)" and r["triton_version"] for r in rows)


def test_table_row_counts_codes_scales_zeros_q_and_output() -> None:
    shape = {"batch": 1, "kv_len": 8192, "num_q_heads": 32, "num_kv_heads": 32, "head_dim": 128}
    t, copy = Timing(100.0, 90.0, 110.0, 5, "test"), Timing(50.0, 50.0, 50.0, 5, "test")
    row = ba.table_row(shape, 4, False, "triton", "attention_decode_kernel", "{}", t, copy, 300.0)
    kv = 32 * 8192 * 2 * (128 // 2 + 4)  # K and V: int4 codes + fp16 scale and zero per token
    assert row["kv_bytes"] == kv
    assert row["bytes_moved"] == kv + 2 * 32 * 128 * 2  # + q read + output written
    assert row["achieved_GBps"] == pytest.approx(row["bytes_moved"] / 100.0 / 1e3)
    assert (row["speedup_vs_fp16_kv"], row["fraction_of_copy"]) == (3.0, 0.5)


def test_goal_lines_compare_with_fp16_kv_at_8k() -> None:
    lines = ba.check_goals({("vicuna-7b", 1, 8192): {16: 100.0, 8: 60.0, 4: 45.0},
                            ("vicuna-7b", 1, 1024): {16: 10.0, 8: 10.0, 4: 10.0}})
    assert lines == ["goal vicuna-7b B=1 kv=8192 int8: x1.67 (goal x1.6) met",
                     "goal vicuna-7b B=1 kv=8192 int4: x2.22 (goal x2.5) MISSED"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_without_cuda_it_says_so_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert ba.main(["--out", "/nonexistent/never.csv"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
