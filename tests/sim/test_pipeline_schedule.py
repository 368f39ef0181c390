"""The pipeline schedule (mpsim/sim/pipeline.py) against hand computations, and the serial sum it
must give on one stage or one micro-batch, through `simulate` (sim and roofline)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.pipeline import schedule
from mpsim.synth import synthesize
from mpsim.traces.io import META_KEY, read_trace
from mpsim.traces.schema import SCHEMA_VERSION
from mpsim.workload import Workload

T, C = 3.0e-3, 0.25e-3  # a stage's compute and a send/recv, seconds
REL = 1e-12  # sums of a few dozen floats: relative rounding far below this


def _rows(segments: list[tuple[str, int, int, int, list[float]]]) -> tuple[pd.DataFrame, np.ndarray]:
    """Launch rows of (phase, step, micro_batch, stage, launch seconds) segments in issue order."""
    recs, times = [], []
    for phase, step, mb, stage, seconds in segments:
        for s in seconds:
            recs.append({"phase": phase, "step": step, "micro_batch": mb, "stage": stage})
            times.append(s)
    rows = pd.DataFrame(recs).astype({"phase": "category", "step": "Int32", "micro_batch": "Int16",
                                      "stage": "Int16"})
    return rows, np.asarray(times)


def _pass(phase: str, step: int, micro: int, stage_seconds: list[list[float]]
          ) -> list[tuple[str, int, int, int, list[float]]]:
    """A pass as the synthesizer lays it out: micro-batch after micro-batch, stage after stage."""
    return [(phase, step, m, s, sec) for m in range(micro) for s, sec in enumerate(stage_seconds)]


def test_equal_stages_prefill_makespan_is_m_plus_pp_minus_1_stage_times_plus_the_sends() -> None:
    # 2 stages, 4 micro-batches; stage 0 computes T then sends C (on the sender), stage 1 computes T:
    # stage 1 always waits for stage 0 (T + C > T), so micro-batch m ends at (m + 1)(T + C) + T
    rows, t = _rows(_pass("prefill", 0, 4, [[T / 2, T / 2, C], [T]]))
    sched = schedule(rows, t)
    assert sched.pipelined
    assert sched.makespan_s == pytest.approx((4 + 2 - 1) * T + 4 * C, rel=REL)
    assert sched.stage_busy_s == pytest.approx((4 * (T + C), 4 * T), rel=REL)
    assert sched.bubble_fraction == pytest.approx(1 - (8 * T + 4 * C) / (2 * (5 * T + 4 * C)), rel=REL)
    # stage 1's micro-batch m starts when stage 0's has sent it
    stage1 = (rows["stage"] == 1).to_numpy()
    assert sched.start[stage1] == pytest.approx([(m + 1) * (T + C) for m in range(4)], rel=REL)


@pytest.mark.parametrize("slow", [0, 1])
def test_unequal_stages_run_at_the_slower_stage(slow: int) -> None:
    # 3 micro-batches, one stage 2T, the other T, no sends: M x 2T + T either way round
    stage_seconds = [[T], [T]]
    stage_seconds[slow] = [T, T]
    rows, t = _rows(_pass("prefill", 0, 3, stage_seconds))
    assert schedule(rows, t).makespan_s == pytest.approx(7 * T, rel=REL)


def test_decode_waits_for_the_same_micro_batch_s_last_stage() -> None:
    # 2 stages x 2 micro-batches, equal stages T: after the prefill's fill, each decode step keeps
    # both stages busy (2 T a step, no bubble), micro-batch 0's next step starting at stage 1's end
    segs = _pass("prefill", 0, 2, [[T], [T]]) + _pass("decode", 1, 2, [[T], [T]]) \
        + _pass("decode", 2, 2, [[T], [T]])
    rows, t = _rows(segs)
    sched = schedule(rows, t)
    assert sched.makespan_s == pytest.approx(7 * T, rel=REL)
    first_decode = ((rows["step"] == 1) & (rows["micro_batch"] == 0) & (rows["stage"] == 0)).to_numpy()
    assert sched.start[first_decode] == pytest.approx([2 * T], rel=REL)  # prefill mb 0 left stage 1 at 2T
    # one micro-batch: every segment waits for the one before it, the serial sum
    one, t1 = _rows(_pass("prefill", 0, 1, [[T], [T]]) + _pass("decode", 1, 1, [[T], [T]]))
    serial = schedule(one, t1)
    assert not serial.pipelined and serial.makespan_s == 4 * T
    assert serial.bubble_fraction == pytest.approx(0.5, rel=REL)


SMALL = PRESETS["mobilellama-1.4b"]


@pytest.mark.parametrize("model", ["sim", "roofline"])
@pytest.mark.parametrize(("pp", "micro"), [(1, 2), (2, 1)])
def test_one_stage_or_one_micro_batch_is_the_serial_sum_exactly(model: str, pp: int, micro: int) -> None:
    trace = synthesize(SMALL, parse_policy("w4"), Workload(32, 3, 4), pp=pp, micro_batches=micro)
    run = simulate(trace, load_hardware("h100-sxm"), model, cache_dir=None)
    time_s = run.column("time_s").to_numpy()
    assert (run.column("end_s").to_numpy() == np.cumsum(time_s)).all()
    prefill = (trace.rows["phase"] == "prefill").to_numpy()
    assert run.summary.ttft_s == float(pd.Series(time_s[prefill]).sum())
    assert run.summary.total_s == float(pd.Series(time_s).sum())


@pytest.mark.parametrize("model", ["sim", "roofline"])
def test_micro_batched_trace_overlaps_its_stages(model: str) -> None:
    trace = synthesize(SMALL, parse_policy("w4"), Workload(32, 3, 4), pp=2, micro_batches=2)
    run = simulate(trace, load_hardware("h100-sxm"), model, cache_dir=None)
    s, time_s = run.summary, run.column("time_s").to_numpy()
    start, end = run.column("start_s").to_numpy(), run.column("end_s").to_numpy()
    stage = trace.rows["stage"].to_numpy(dtype=int)
    for st in (0, 1):  # a stage's launches in issue order, never overlapping
        on = stage == st
        assert (start[on][1:] >= end[on][:-1] * (1 - REL)).all()
    assert max(s.stage_busy_s) <= s.total_s < time_s.sum()  # concurrent stages: below the serial sum
    assert s.total_s == pytest.approx(end.max(), rel=REL)
    assert 0 < s.bubble_fraction < 1
    decode = (trace.rows["phase"] == "decode").to_numpy()
    assert s.ttft_s == pytest.approx(end[~decode].max(), rel=REL)
    assert s.tpot_mean_s * 2 == pytest.approx(end.max() - s.ttft_s, rel=1e-9)  # two decode steps


def test_micro_batches_split_the_batch() -> None:
    wl = Workload(16, 2, 4)
    whole = synthesize(SMALL, parse_policy("w4"), Workload(16, 2, 2), pp=2).rows
    split = synthesize(SMALL, parse_policy("w4"), wl, pp=2, micro_batches=2).rows
    assert len(split) == 2 * len(whole)
    for m in (0, 1):  # each micro-batch's launches are a batch-2 pass's, launch ids aside
        part = split[split["micro_batch"] == m].reset_index(drop=True)
        cols = [c for c in whole.columns if c not in ("launch_id", "micro_batch")]
        pd.testing.assert_frame_equal(part[cols], whole[cols])
    with pytest.raises(MpsimInputError, match="--micro-batches 3 does not divide the batch of 4"):
        synthesize(SMALL, parse_policy("w4"), wl, pp=2, micro_batches=3)


def test_timeline_puts_each_stage_on_its_own_track() -> None:
    from mpsim.traces.chrome import chrome_events

    trace = synthesize(SMALL, parse_policy("w4"), Workload(16, 2, 2), pp=2, micro_batches=2)
    run = simulate(trace, load_hardware("h100-sxm"), "roofline", cache_dir=None)
    rows = trace.rows.reset_index(drop=True)
    events = chrome_events(rows, run.column("start_s").to_numpy() * 1e6,
                           run.column("time_s").to_numpy() * 1e6, "roofline on h100-sxm")["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}  # type: ignore[index]
    assert names == {0: "roofline on h100-sxm stage 0", 1: "roofline on h100-sxm stage 1"}
    launches = [e for e in events if e["ph"] == "X"]  # type: ignore[index]
    assert [e["pid"] for e in launches] == list(rows["stage"].astype(int))  # type: ignore[index]
    assert {e["args"]["micro_batch"] for e in launches} == {0, 1}  # type: ignore[index]


def test_a_version_5_file_reads_as_micro_batch_0(tmp_path: Path) -> None:
    rows = synthesize(SMALL, parse_policy("w4"), Workload(8, 2, 2), pp=2).rows
    table = pa.Table.from_pandas(rows.drop(columns=["micro_batch"]), preserve_index=False)
    meta = {"schema_version": 5, "source": "synth", "engine": "mpsim"}
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}),
                   tmp_path / "v5.parquet")
    back = read_trace(tmp_path / "v5.parquet")
    assert back.meta.schema_version == SCHEMA_VERSION == 6
    assert (back.rows["micro_batch"] == 0).all()
    pd.testing.assert_frame_equal(back.rows, rows)


def test_synth_cli_refuses_micro_batches_that_do_not_divide_the_batch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bad_input_cases import clear_error

    clear_error(["synth", "--model", "tiny", "--policy", "fp16", "--prompt-len", "8", "--gen-len", "2",
                 "--batch", "4", "--pp", "2", "--micro-batches", "3", "--out", str(tmp_path / "t.parquet")],
                capsys, "--micro-batches 3 does not divide the batch of 4 sequences")
    clear_error(["synth", "--model", "tiny", "--policy", "fp16", "--prompt-len", "8", "--gen-len", "2",
                 "--batch", "4", "--micro-batches", "0",
                 "--out", str(tmp_path / "t.parquet")], capsys, "--micro-batches 0: expected a whole number")
