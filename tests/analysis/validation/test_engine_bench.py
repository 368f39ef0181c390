"""Reading engine-benchmarks.md: the real file in place (skipped without ../shared) and a small fake
one, including rows whose wording no longer parses."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_bench_cases import ROWS, fake_file

from mpsim.analysis.validation.engine_bench import default_path, read_table
from mpsim.analysis.validation.engine_rows import READERS, Precision, setups
from mpsim.errors import MpsimInputError

REAL = default_path()


@pytest.mark.skipif(not REAL.is_file(), reason=f"the shared engine benchmarks are not at {REAL}")
def test_the_real_file_gives_every_owned_row() -> None:
    got = {s.row: s for s in setups(read_table(REAL))}
    assert list(got) == list(READERS)
    assert [got[r].count for r in got] == ["whole-run", "whole-run-per-gpu", "whole-run", "decode-log",
                                           "latency", "served", "whole-run"]
    assert [(got[r].engine, got[r].hw, got[r].model) for r in got] == [
        ("trtllm", "h200-sxm", "llama-3-8b"), ("trtllm", "h200-sxm", "llama-3-70b"),
        ("trtllm", "h100-sxm", "llama-2-7b"), ("sglang-torchnative", "h100-sxm", "llama-3-8b"),
        ("vllm", "h100-sxm", "llama-3-8b"), ("vllm", "h100-sxm", "qwen3-8b"),
        ("trtllm", "l40s", "llama-2-7b")]
    assert got["E8"].batches is None and got["E4"].baseline.published is None
    assert [(p.label, p.tp) for p in got["E2"].precisions] == [("BF16 TP2", 2), ("FP8", 1), ("INT4-AWQ", 1)]
    assert [p.tp for p in got["E5"].precisions] == [1, 1, 1, 4, 4, 4]
    for s in got.values():
        for p in s.precisions:
            if p.published is not None:
                batches = s.batches_of(p)
                assert batches is None or len(p.published) == len(batches)
                assert all(v > 0 for v in p.published)


def test_the_fake_file_reads_exactly(tmp_path: Path) -> None:
    got = {s.row: s for s in setups(read_table(fake_file(tmp_path)))}
    e1 = got["E1"]
    assert (e1.engine, e1.hw, e1.model, e1.prompt_len, e1.gen_len, e1.batches) == \
        ("trtllm", "h200-sxm", "llama-3-8b", 64, 8, (1, 2))
    assert e1.precisions == (Precision("BF16", "fp16", (10.5, 20.0)),
                             Precision("INT4-AWQ", "w4g128", (12.0, 18.0), method="awq"),
                             Precision("FP8", "fp8", (11.0, 21.0), owner="26"))
    e2 = got["E2"]  # E1's workload at batch 1; the BF16 run's tokens/s are two GPUs'
    assert (e2.model, e2.prompt_len, e2.gen_len, e2.batches, e2.count) == \
        ("llama-3-70b", 64, 8, (1,), "whole-run-per-gpu")
    assert e2.precisions == (Precision("BF16 TP2", "fp16", (4.5,), tp=2, owner="25"),
                             Precision("FP8", "fp8", (8.0,), owner="25, 26"),
                             Precision("INT4-AWQ", "w4g128", (8.5,), owner="25", method="awq"))
    e4 = got["E4"]
    assert (e4.prompt_len, e4.gen_len, e4.batches) == (32, 4, (1, 2))
    assert e4.precisions[1] == Precision("FP8", "fp8", None, owner="26", ratios=(1.1, 1.2))
    e5 = got["E5"]
    assert (e5.prompt_len, e5.gen_len, e5.batches, e5.count) == (48, 70, (1, 4), "decode-log")
    assert e5.log == (40, 15)
    assert [p.published for p in e5.precisions] == [(100.0, 300.0), (150.0, 350.0), (120.0, 330.0),
                                                    (1.0,), (2.0,), (3.0,)]
    assert e5.precisions[5] == Precision("fp8 dynamic TP4", "fp8grow", (3.0,), tp=4, owner="25, 26",
                                         base="fp8 dynamic", batches=(4,))
    assert e5.base_of(e5.precisions[4]).label == "int4 g64 (GemLite)"
    e7 = got["E7"]
    assert (e7.model, e7.prompt_len, e7.gen_len, e7.batches, e7.count, e7.scheduler, e7.band) == \
        ("qwen3-8b", 24, 3, (1000,), "served", (1024, 16384), (0.9, 1.1))
    assert e7.spec is not None and (e7.spec.num_layers, e7.spec.ffn, e7.spec.vocab) == (36, 12288, 151936)
    assert [(p.policy, p.published) for p in e7.precisions] == [("fp16", (500.0,)), ("fp8b", (490.0,))]
    e6 = got["E6"]
    assert (e6.prompt_len, e6.gen_len, e6.batches, e6.count) == (16, 4, (1, 2), "latency")
    assert [(p.policy, p.published, p.method) for p in e6.precisions] == \
        [("fp16", (0.2, 0.3), None), ("w8g128", (0.15, 0.25), "rtn"), ("w4g128", (0.1, 0.2), "rtn")]
    assert [(p.policy, p.published) for p in got["E8"].precisions] == \
        [("fp16", (400.0,)), ("w4g128", (600.0,))]


@pytest.mark.parametrize(("row", "text", "says"), [
    ("E1", ROWS["E1"].replace("batch 1 / 2", "batch 1 / 2 / 4"), "3 number(s) after 'BF16', found 2"),
    ("E1", ROWS["E1"].replace("H200", "H100"), "the text 'H200'"),
    ("E4", ROWS["E4"].replace("(bs 2)", "(batch 2)"), "two '(bs N)'"),
    ("E5", ROWS["E5"].replace("300 / 350 / 330", "300 / 350"), "as many TP1 bs4 values"),
    ("E5", ROWS["E5"].replace("int4 g64 (GemLite)", "int4 g128"), "labelled 'int4 g64 (GemLite)'"),
    ("E5", ROWS["E5"].replace("TP4 bs4: 1 / 2 / 3", "TP4 bs4: 1 / 2"), "as many TP4 bs4 values"),
    ("E2", ROWS["E2"].replace("same, batch 1", "batch 1"), "the text 'same, batch 1'"),
    ("E2", ROWS["E2"].replace("FP8 8,", "FP8 n/a,"), "'FP8' followed by 1 number"),
    ("E4", ROWS["E4"].replace("FP8 1.1x", "FP8 faster"), "'FP8 R.RRx (bs N), R.RRx (bs N)'"),
    ("E6", ROWS["E6"].replace("--output-len 4", "--output 4"), "--input-len N --output-len N"),
    ("E7", ROWS["E7"].replace("v0.10.2", "v0.11"), "'v0.10.2: bf16 N, FP8 N'"),
    ("E8", ROWS["E8"].replace("W4A16 600", "W4A16 n/a"), "'W4A16' followed by 1 number"),
])
def test_a_row_that_no_longer_parses_is_an_error_naming_it(tmp_path: Path, row: str, text: str,
                                                           says: str) -> None:
    with pytest.raises(MpsimInputError, match=rf"row {row}, column .*expected") as err:
        setups(read_table(fake_file(tmp_path, **{row: text})))
    assert says in str(err.value)


def test_file_level_problems(tmp_path: Path) -> None:
    with pytest.raises(MpsimInputError, match=r"no engine benchmarks file at .*--benchmarks"):
        read_table(tmp_path / "absent.md")
    with pytest.raises(MpsimInputError, match="no row E6"):
        setups(read_table(fake_file(tmp_path, E6="")))
    with pytest.raises(MpsimInputError, match="no row E1"):
        setups(read_table(fake_file(tmp_path, E1="")))
    with pytest.raises(MpsimInputError, match="row E4 has 7 cells, expected 8"):
        read_table(fake_file(tmp_path, E4=ROWS["E4"].replace("| same ", "")))
    with pytest.raises(MpsimInputError, match="row E1 appears twice"):
        read_table(fake_file(tmp_path, E4=ROWS["E1"]))
    bad = tmp_path / "bad.md"
    bad.write_text("| # | GPU |\n|---|---|\n| E1 | H200 |\n", encoding="utf-8")
    with pytest.raises(MpsimInputError, match="expected a table with the columns"):
        read_table(bad)
