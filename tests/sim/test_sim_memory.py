"""The replay holds little per launch: launch keys come from per-column codes (the same grouping as
a pandas groupby over the key columns), and the per-launch table is built only when read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mpsim.commands.simulate import describe_run
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.keys import KEY_COLUMNS, bucketed_kv, launch_keys, resident_bytes
from mpsim.sim.result import LAUNCH_COLUMNS
from mpsim.synth import synthesize
from mpsim.traces.schema import COLUMNS
from mpsim.traces.trace import Trace, rows_to_frame
from mpsim.workload import Workload


@pytest.fixture(scope="module")
def trace() -> Trace:
    return synthesize(PRESETS["llama-3-8b"], parse_policy("ap4-4@40-3+kv8"), Workload(100, 150, 2),
                      kv_block=64)


def _groupby_codes(rows: pd.DataFrame, cap: float) -> np.ndarray:
    frame = rows.loc[:, list(KEY_COLUMNS)].astype(object)
    kv, tokens = bucketed_kv(rows)
    frame["kv_len"], frame["kv_tokens"] = kv.astype(object), tokens.astype(object)
    frame["resident"] = resident_bytes(rows, cap)
    return frame.groupby(list(frame.columns), dropna=False, sort=False).ngroup().to_numpy()


@pytest.mark.parametrize("cap", [0.0, 37e6])
@pytest.mark.parametrize("wide", [False, True])
def test_launch_keys_group_like_a_groupby(trace: Trace, cap: float, wide: bool) -> None:
    rows = trace.rows.astype(COLUMNS) if wide else trace.rows
    codes, reps = launch_keys(rows, cap)
    assert np.array_equal(codes, _groupby_codes(trace.rows, cap))
    first = [int(np.flatnonzero(codes == c)[0]) for c in range(len(reps))]
    assert list(reps["launch_id"]) == [int(trace.rows["launch_id"].iloc[i]) for i in first]
    assert reps["kv_len"].dtype.kind == "i"  # integers (the memo key spells 576, not 576.0)


def test_the_per_launch_table_is_built_only_when_read(trace: Trace) -> None:
    result = simulate(trace, load_hardware("h200-sxm"), cache_dir=None)
    describe_run(result)
    assert result.summary.tokens_per_s > 0
    assert "launches" not in result.__dict__  # neither the summary nor the run facts built it
    columns = {c: result.column(c) for c in LAUNCH_COLUMNS}
    table = result.launches
    assert list(table.columns) == list(LAUNCH_COLUMNS) and table.index.equals(trace.rows.index)
    for c in LAUNCH_COLUMNS:
        pd.testing.assert_series_equal(table[c], columns[c])
    assert table["bound"].dtype == "category"


@pytest.mark.parametrize("model", ["sim", "roofline"])
def test_simulating_leaves_the_rows_as_they_were(trace: Trace, model: str) -> None:
    one = rows_to_frame([attention_row(1, 1, 3000, 32, 8, 128, 4)])  # no NA: columns are views
    for rows in (trace.rows, one):
        for typed in (rows.copy(), rows.astype(COLUMNS)):  # storage and wide (Int64) dtypes
            before = typed.copy()
            simulate(typed, load_hardware("h100-sxm"), model, cache_dir=None)
            pd.testing.assert_frame_equal(typed, before)
