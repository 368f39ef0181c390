"""Repeating engine-benchmarks rows: the runs per row, how each counts (whole run, decode rate,
request latency), the memory-budget batch, the ratios to the baseline and the docs block."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from engine_bench_cases import ROWS, fake_file

from mpsim.analysis.validation import engines
from mpsim.analysis.validation.engine_bench import read_table
from mpsim.analysis.validation.engine_rows import NOT_OWNED, RowSetup, setups
from mpsim.analysis.validation.engine_run import (
    counted,
    gpu,
    log_window,
    memory_batch,
    model,
    predict,
    runs,
    stand_ins,
)
from mpsim.analysis.validation.engine_table import block, outcomes
from mpsim.analysis.validation.report_md import write_doc
from mpsim.engines import get_engine
from mpsim.errors import MpsimInputError
from mpsim.memory import MEMORY_UTILIZATION, per_gpu_bytes, point_memory
from mpsim.policy import parse_policy
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.summary import RunSummary
from mpsim.workload import Workload


@pytest.fixture
def rows(tmp_path: Path) -> dict[str, RowSetup]:
    return {s.row: s for s in setups(read_table(fake_file(tmp_path)))}


def test_each_count_reads_its_figure() -> None:
    s = RunSummary(0.5, 0.01, 0.01, 0.01, 2.0, 64.0, 128.0, {})
    assert (counted("whole-run", s), counted("decode-rate", s), counted("latency", s)) == (64.0, 128.0, 2.0)


def test_runs_per_precision_and_batch(rows: dict[str, RowSetup]) -> None:
    got = [(r.precision.label, r.batch, r.published) for r in runs(rows["E1"])]
    assert got == [("BF16", 1, 10.5), ("BF16", 2, 20.0), ("INT4-AWQ", 1, 12.0), ("INT4-AWQ", 2, 18.0),
                   ("FP8", 1, 11.0), ("FP8", 2, 21.0)]
    assert [(r.batch, r.published) for r in runs(rows["E4"])] == [(1, None), (2, None)] * 2
    # a TP4 run at its own batch only
    assert [(r.precision.label, r.batch) for r in runs(rows["E5"])][6:] == \
        [("bf16 TP4", 4), ("int4 g64 (GemLite) TP4", 4), ("fp8 dynamic TP4", 4)]


def test_the_memory_budget_batch_is_the_largest_that_fits(rows: dict[str, RowSetup]) -> None:
    e8 = rows["E8"]
    spec, hw = model(e8), gpu(e8)
    budget = MEMORY_UTILIZATION * hw.dram.size_GB * 1e9

    def need(policy: str, b: int) -> int:
        pol = parse_policy(policy)
        return per_gpu_bytes(spec, point_memory(spec, pol, Workload(e8.prompt_len, e8.gen_len, b)), 1)

    batches = {}
    for policy in ("fp16", "w4g128"):
        b = memory_batch(spec, parse_policy(policy), e8, hw)
        assert need(policy, b) <= budget < need(policy, b + 1)
        batches[policy] = b
    assert batches["w4g128"] > batches["fp16"]
    assert [r.batch for r in runs(e8)] == [batches["fp16"], batches["w4g128"]]


def test_the_three_counts_of_one_run(rows: dict[str, RowSetup]) -> None:
    """The same run counted three ways: whole-run tokens/s is batch x new tokens over the latency;
    the decode rate leaves the prefill out, so it is higher."""
    memo = LaunchMemo(None)
    run = runs(replace(rows["E6"], batches=(2,), prompt_len=16, gen_len=4))[0]
    latency = predict(run, memo)
    whole = predict(replace(run, setup=replace(run.setup, count="whole-run")), memo)
    decode = predict(replace(run, setup=replace(run.setup, count="decode-rate")), memo)
    assert whole == 2 * 4 / latency
    assert decode > whole > 0


def test_the_last_log_window_counts_the_warm_up_passes() -> None:
    """SGLang logs every 40 decode passes counted from its start: after 15 warm-up passes, a run of
    512 new tokens (decode passes 1..511) logs last at pass 505 (15 + 505 = 520), over passes
    466..505; a run too short for a full window after the warm-up is an error."""
    assert log_window(512, 40, 15) == (466, 505)
    assert log_window(70, 40, 15) == (26, 65)
    assert log_window(41, 40, 0) == (1, 40)
    with pytest.raises(MpsimInputError, match="no full window of 40"):
        log_window(60, 40, 15)


def test_the_logged_window_is_the_rate_of_its_passes(rows: dict[str, RowSetup]) -> None:
    """The decode-log count is batch x passes over the window's time (passes 26..65 of 69): at 48
    to 118 tokens of context every pass costs about the same, so it is the whole decode rate within
    1% (the window leaves out the first and last passes, not a different kind of work)."""
    memo = LaunchMemo(None)
    run = runs(replace(rows["E5"], batches=(4,)))[0]
    logged = predict(run, memo)
    decode = predict(replace(run, setup=replace(run.setup, count="decode-rate")), memo)
    assert logged > 0 and abs(logged / decode - 1) < 0.01


def test_the_engine_prices_the_run(rows: dict[str, RowSetup]) -> None:
    """The row's engine file chooses the kernels: TRT-LLM's w4 run differs from mpsim's own."""
    memo = LaunchMemo(None)
    small = replace(rows["E1"], batches=(1,), prompt_len=16, gen_len=3)
    run = runs(small)[1]
    assert run.precision.policy == "w4g128"
    mine = predict(replace(run, setup=replace(small, engine="mpsim")), memo)
    assert predict(run, memo) != mine


def test_ratios_and_errors_per_count(rows: dict[str, RowSetup]) -> None:
    e6 = runs(rows["E6"])  # latency: a ratio is the baseline's time over the precision's
    out = {(o.run.precision.label, o.run.batch): o for o in outcomes(e6, [0.25, 0.3, 0.2, 0.25, 0.1, 0.15])}
    int4 = out[("Marlin int4", 1)]
    assert int4.base.precision.label == "BF16" and int4.base.batch == 1
    assert int4.error == pytest.approx(0.1 / 0.1 - 1)
    assert int4.ratio_published == pytest.approx(0.2 / 0.1)
    assert int4.ratio_predicted == pytest.approx(0.25 / 0.1)
    assert int4.ratio_error == pytest.approx(2.5 / 2.0 - 1)
    base = out[("BF16", 2)]
    assert base.ratio_published is None and base.ratio_error is None
    assert base.error == pytest.approx(0.3 / 0.3 - 1)
    e1 = outcomes(runs(rows["E1"]), [10.0, 20.0, 15.0, 10.0, 12.0, 24.0])  # tokens/s: over baseline
    assert e1[3].ratio_published == pytest.approx(18 / 20) and e1[3].ratio_predicted == pytest.approx(0.5)
    assert e1[5].ratio_published == pytest.approx(21 / 20) and e1[5].ratio_predicted == pytest.approx(1.2)
    e4 = outcomes(runs(rows["E4"]), [5.0, 9.0, 6.0, 9.9])  # FP8: only its speedups are published
    assert all(o.error is None and o.ratio_error is None for o in e4[:2])
    assert [o.ratio_published for o in e4[2:]] == [1.1, 1.2]
    assert e4[3].error is None and e4[3].ratio_error == pytest.approx(1.1 / 1.2 - 1)


def test_a_tp4_run_is_compared_with_its_precision_on_one_gpu(rows: dict[str, RowSetup]) -> None:
    """E5's TP4 runs (batch 4 only) against the same precision's TP1 run at batch 4, not at the
    same position (batch 1)."""
    e5 = runs(rows["E5"])
    outs = outcomes(e5, [float(i + 1) for i in range(len(e5))])
    tp4 = {o.run.precision.label: o for o in outs if o.run.precision.tp == 4}
    fp8 = tp4["fp8 dynamic TP4"]
    assert (fp8.base.precision.label, fp8.base.batch, fp8.base_predicted) == ("fp8 dynamic", 4, 6.0)
    assert fp8.ratio_predicted == pytest.approx(9.0 / 6.0)
    assert fp8.ratio_published == pytest.approx(3.0 / 330.0) and fp8.owners == ["25", "26"]


def test_per_gpu_counts_and_the_qualitative_band(rows: dict[str, RowSetup]) -> None:
    s = RunSummary(0.5, 0.01, 0.01, 0.01, 2.0, 64.0, 128.0, {})
    assert counted("whole-run-per-gpu", s, 2) == 32.0 and counted("whole-run", s, 2) == 64.0
    e7 = runs(rows["E7"])
    inside, outside = outcomes(e7, [100.0, 105.0]), outcomes(e7, [100.0, 112.0])
    assert inside[1].in_band is True and outside[1].in_band is False and inside[0].in_band is None
    text = block([rows["E7"]], outside, {"E7": []})
    assert "(target 0.9-1.1x ✗)" in text and "0 of 1 qualitative ratios in their band" in text
    assert "| -80.0% |" in text and "| -77.1% |" in text  # shown, not targets of a qualitative row
    assert "| 0.980x | 1.120x |" in text  # a band's ratios to three places (1.104 is outside 1.1)


def test_a_tensor_parallel_run_counts_per_gpu(rows: dict[str, RowSetup]) -> None:
    """E2's BF16 run is synthesized on 2 GPUs (one rank's launches and the all-reduces) and counts
    the run's tokens/s over its 2 GPUs."""
    from mpsim.engines import EngineChoice
    from mpsim.sim import simulate
    from mpsim.synth import synthesize

    small = replace(rows["E2"], prompt_len=16, gen_len=3)
    run = runs(small)[0]
    assert run.precision.tp == 2
    memo = LaunchMemo(None)
    hw = gpu(small)
    trace = synthesize(model(small), parse_policy("fp16"), run.workload,
                       engine=EngineChoice.on("trtllm", hw), tp=2)
    assert (trace.rows["op"] == "allreduce").any()
    assert predict(run, memo) == simulate(trace, hw, memo=memo).summary.tokens_per_s / 2


def test_a_served_row_is_mpsim_serve(rows: dict[str, RowSetup]) -> None:
    """E7 as `mpsim serve` with its scheduler settings: a few prompts at 0 s (the row's 1000 take
    a minute); FP8's block-scaled GEMMs serve through the engine's parts."""
    small = replace(rows["E7"], batches=(6,), prompt_len=32, gen_len=4)
    memo = LaunchMemo(None)
    got = [predict(r, memo) for r in runs(small)]
    assert all(math.isfinite(v) and v > 0 for v in got)
    assert got[0] != got[1]


def test_the_block_and_the_doc(rows: dict[str, RowSetup], tmp_path: Path) -> None:
    e6 = runs(rows["E6"])
    text = block([rows["E6"]], outcomes(e6, [0.2, 0.3, 0.2, 0.25, 0.1, 0.2]),
                 {"E6": ["k1 for X", "k2 for Y"]})
    assert "| E6 | 23 | vllm on h100-sxm | Marlin int8 (w8g128) | 1 | 0.150 s | 0.200 s | +33.3% ✗ " \
        "| BF16 |" in text
    assert "| E6 | 23 | vllm on h100-sxm | BF16 (fp16) | 2 | 0.300 s | 0.300 s | +0.0% | - | - | - | - |" \
        in text
    assert "- issue 23: 5 of 6 published values within 15%" in text and "**not met**" in text
    assert "Kernels standing in on this GPU: k1 for X; k2 for Y." in text
    assert "counts seconds per request" in text
    assert all(f"- {row}: {why}" in text for row, why in NOT_OWNED)
    doc = tmp_path / "validation.md"
    doc.write_text("a\n<!-- validation:engines -->\nold\n<!-- /validation:engines -->\nb\n", encoding="utf-8")
    write_doc(doc, {engines.BLOCK: text})
    assert doc.read_text(encoding="utf-8") == \
        f"a\n<!-- validation:engines -->\n{text}\n<!-- /validation:engines -->\nb\n"


def test_stand_ins_are_the_engine_files_on_the_rows_gpu(rows: dict[str, RowSetup]) -> None:
    e8 = rows["E8"]  # TensorRT-LLM on an L40S (Ada)
    engine = get_engine(e8.engine)
    ops = ("gemm", "decode_attention", "prefill_attention")
    named = {f"{c.kernel} for {c.stands_in_for}": c for op in ops
             for f in engine.formats(op) for c in engine.choices(op, f) if c.stands_in_for}
    got = stand_ins(e8)
    assert len(got) == len(set(got)) and all("ada" in named[s].arch for s in got)
    assert text_of_none(e8).endswith("Kernels standing in on this GPU: none.")


def text_of_none(setup: RowSetup) -> str:
    return next(ln for ln in block([setup], [], {setup.row: []}).splitlines() if ln.startswith("- **"))


def test_the_command_fails_with_the_row_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = fake_file(tmp_path, E5=ROWS["E5"].replace("48 in / 70 out", "48 in, 70 out"))
    assert engines.main(["--benchmarks", str(bad), "--print", "--no-cache"]) == 2
    assert "row E5, column 'workload'" in capsys.readouterr().err
    assert engines.main(["--benchmarks", str(tmp_path / "none.md"), "--print"]) == 2
    assert "no engine benchmarks file" in capsys.readouterr().err


def test_every_ratio_is_finite_when_all_runs_are(rows: dict[str, RowSetup]) -> None:
    e1 = outcomes(runs(rows["E1"]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert all(math.isfinite(o.ratio_predicted) for o in e1 if o.ratio_predicted is not None)
