"""analysis/validation/loop_stages.py: the kit's pipelined / plain-loop pairs against the model, on
a bench table written here (no GPU: the medians are made up, the model's prices are real)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.bench import kernels as bench_kernels
from mpsim.analysis.validation import loop_stages as report
from mpsim.kernels.launch_config import LOOP_STAGES_KEY, gemm_config


def _bench_rows(device: str) -> list[dict[str, object]]:
    rows = []
    for fmt, w_format, bits, group in (("fp16", "fp16", 16, None), ("int4-g128", "int4-group", 4, 128)):
        cfg = gemm_config(1, 4096, 4096, w_format, bits, group)
        plain = {**cfg.config_dict()}
        plain.pop(LOOP_STAGES_KEY)
        for impl, config, us in (("triton", cfg.config_dict(), 10.0), ("triton-plain-loop", plain, 20.0)):
            rows.append(dict(device=device, model="vicuna-7b", module="o", m=1, n=4096, k=4096,
                             impl=impl, format=fmt, w_format=w_format, w_bits=bits, group_size=group,
                             kernel=cfg.kernel, config=json.dumps(config, sort_keys=True),
                             median_us=us))
    return rows


def test_pairs_are_priced_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "bench.csv"
    pd.DataFrame(_bench_rows("NVIDIA H200")).to_csv(path, index=False)
    table = report.compare(report.read_bench(path), "h200-sxm")
    assert sorted(table["format"]) == ["fp16", "int4-g128"]
    assert (table["gain"] == 2.0).all()
    # the model: the pipelined loop at least 1.5x faster than the lock-step one at 4096 x 4096
    assert (table["pred_gain"] > 1.5).all()
    assert (table["err_piped_pct"] == 100 * (table["pred_piped_us"] / 10.0 - 1)).all()
    md = report.markdown(table, "h200-sxm")
    assert "| vicuna-7b | o | 4096 x 4096 | int4-g128 | 10.0 (" in md


def test_the_doc_block_takes_a_gpu_table_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, doc = tmp_path / "bench.csv", tmp_path / "doc.md"
    doc.write_text("x\n<!-- validation:loop-stages -->\n<!-- /validation:loop-stages -->\n")
    pd.DataFrame(_bench_rows(report.INTERPRETER)).to_csv(path, index=False)
    assert report.main([str(path), "--doc", str(doc)]) == 0
    assert "dry run" in capsys.readouterr().out and "| vicuna-7b |" not in doc.read_text()
    pd.DataFrame(_bench_rows("NVIDIA H200")).to_csv(path, index=False)
    assert report.main([str(path), "--doc", str(doc)]) == 0
    assert "| vicuna-7b | o | 4096 x 4096 | fp16 |" in doc.read_text()


def test_a_table_without_plain_loop_rows_is_one_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bench.csv"
    pd.DataFrame([r for r in _bench_rows("NVIDIA H200") if r["impl"] == "triton"]).to_csv(path, index=False)
    assert report.main([str(path), "--print"]) == 2
    assert "no M = 1 rows with both impls" in capsys.readouterr().err
    pd.DataFrame([{"device": "x"}]).to_csv(path, index=False)
    assert report.main([str(path), "--print"]) == 2
    assert "not an analysis/bench/kernels.py table" in capsys.readouterr().err


def test_the_kits_dry_run_table_reads(tmp_path: Path) -> None:
    out = tmp_path / "bench.csv"
    assert bench_kernels.main(["--dry-run", "--out", str(out), "--modules", "o", "--rows", "1",
                               "--repeats", "1", "--warmup", "0", "--no-attention"]) == 0
    pairs = report.read_bench(out)
    assert len(pairs) == len(bench_kernels.FORMATS)
    assert (pairs["config_piped"] == pairs["config_plain"]).all()  # the interpreter: no loop_stages
