"""Replaying a trace's rows on a hardware model: the per-launch tables of the two performance models.

`replay_sim` (the SimPy GPU or NPU model, by the hardware's kind) simulates each distinct launch key
once (mpsim.sim.keys) through the memo (mpsim.sim.memo) and broadcasts the outcomes to every row;
`replay_roofline` gives each launch max(t_math, t_mem). `finish` lays the launches back to back in
launch order on one timeline per pipeline stage (all streams serialized; the stages concurrent,
micro-batch by micro-batch: mpsim/sim/pipeline.py) next to their roofline bounds. Every row
carries its roofline bound. On a GPU the bound is residency-aware (mpsim/sim/roofline.py: t_mem
counts only the DRAM bytes the launch must move after what the previous launch left in L2) and a
simulated time below it is a model error, raised naming the launch (`BelowBoundError`), never
clamped. The NPU's launch model keeps its bound as a floor (its bound counts no SRAM residency).
On an NPU the SimPy model runs whole steps instead (mpsim/sim/npu/replay.py): operators overlap,
each launch's `time_s` is its end minus the previous launch's end (no floor: an overlapped
launch's share of the step can be below its own bound; the step as a whole is not), and the
overlapped interval is `busy_start_s`..`busy_end_s`. Every model's rows get `energy_j`
(mpsim/sim/energy.py).

Memory: the replay's outcomes stay one row per distinct launch (`Broadcast`: ~60 rows for a
794k-launch trace, with a code per launch); `finish` keeps per launch only what the timeline needs
(times and roofline bounds) in a `LaunchTable`, which builds the full per-launch DataFrame
(LAUNCH_COLUMNS, ~200 bytes a launch) when it is first asked for (`SimResult.launches`; `mpsim
simulate` asks only for --out or --timeline) and single columns without it.
One launch alone: mpsim/sim/launch.py (`simulate_launch`, `price_launch`).
The registry and the one entry point, `mpsim.sim.simulate`, are in mpsim/sim/registry.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuSpec
from mpsim.sim.energy import dynamic_energy_j, roofline_dynamic_j
from mpsim.sim.energy_costs import static_w
from mpsim.sim.keys import distinct, key_text, launch_keys, rep_row
from mpsim.sim.launch import REL, BelowBoundError, resident_cap, simulate_launch
from mpsim.sim.memo import LaunchMemo, namespace
from mpsim.sim.params import SimParams
from mpsim.sim.pipeline import PipelineSchedule, schedule
from mpsim.sim.result import BODY_PARTS, LAUNCH_COLUMNS, UNITS, LaunchOutcome, latency_part
from mpsim.sim.roofline import roofline, roofline_terms
from mpsim.traces.schema import COLLECTIVE_OPS
from mpsim.traces.trace import Trace


@dataclass(frozen=True)
class Broadcast:
    """Per-launch outcomes as one row per distinct launch (`per_key`) and, per launch, the row of
    its distinct launch (`codes`). A replay returns this or a plain per-launch DataFrame."""

    per_key: pd.DataFrame
    codes: np.ndarray | None  # None: one row per launch already


def replay_sim(rows: pd.DataFrame, hw: Any, params: SimParams, memo: LaunchMemo) -> Broadcast:
    if isinstance(hw, NpuSpec):  # whole steps: one row per launch, with its end and busy interval
        if rows["op"].isin(COLLECTIVE_OPS).any():
            raise MpsimInputError(f"{hw.name}: the trace has collective rows (a parallel plan); "
                                  "parallel plans run on GPUs of a node (hw_models/nodes)")
        from mpsim.sim.npu.replay import replay_npu  # the NPU step model, only for an NPU

        return Broadcast(replay_npu(rows, hw, params, memo), None)
    codes, reps = launch_keys(rows, resident_cap(hw, params))
    ns = namespace(hw, params, "sim")
    outcomes = []
    for rep in reps.to_dict("records"):
        row = rep_row(rep)
        key = key_text(row)
        found = memo.get(ns, key)
        if found is None:
            start = time.perf_counter()
            found = _simulate_row(row, hw, params)
            memo.sim_seconds += time.perf_counter() - start
            memo.put(ns, key, found)
        outcomes.append(found)
    return _broadcast(outcomes, codes)


def _simulate_row(row: dict[str, Any], hw: Any, params: SimParams) -> LaunchOutcome:
    try:
        return simulate_launch(row, hw, params, float(row["resident"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise MpsimInputError(
            f"launch {row.get('launch_id')} ({row.get('kernel')}, op {row.get('op')}): cannot "
            f"simulate on {hw.name}: {exc}") from exc


def _broadcast(outcomes: list[LaunchOutcome], codes: np.ndarray) -> Broadcast:
    """The outcomes as columns, one row per distinct launch; `codes` maps every launch to its row."""
    def col(f: Callable[[LaunchOutcome], Any], dtype: Any = np.float64) -> np.ndarray:
        return np.asarray([f(o) for o in outcomes], dtype=dtype)

    out = {
        "kernel_s": col(lambda o: o.kernel_s), "overhead_s": col(lambda o: o.overhead_s),
        "cycles": col(lambda o: o.cycles), "bytes_dram": col(lambda o: o.bytes_dram),
        "bytes_l2": col(lambda o: o.bytes_l2), "bytes_sram": col(lambda o: o.bytes_sram),
        "bound": _bounds(outcomes), "ctas_per_sm": col(lambda o: o.ctas_per_sm),
        "waves": col(lambda o: o.waves),
    }
    for u in UNITS:
        out[f"util_{u}"] = np.asarray([o.util.get(u, np.nan) for o in outcomes], dtype=float)
    for p in BODY_PARTS:
        out[f"part_{p}_s"] = np.asarray([o.parts.get(p, 0.0) for o in outcomes], dtype=float)
    return Broadcast(pd.DataFrame(out), codes)


def _bounds(outcomes: list[LaunchOutcome]) -> pd.Categorical:
    """The bound of every distinct launch as a categorical (a few names, sorted)."""
    names, index = np.unique([o.bound for o in outcomes], return_inverse=True)
    return pd.Categorical.from_codes(index, categories=names)


def replay_roofline(rows: pd.DataFrame, hw: Any, params: SimParams, memo: LaunchMemo) -> Broadcast:
    """max(t_math, t_mem) of every launch, computed once per distinct (op, FLOPs, bytes)."""
    nbytes = rows["bytes_read"] + rows["bytes_written"]
    codes, first = distinct([rows["op"], rows["flops"], nbytes])
    return Broadcast(_roofline_outcomes(rows.iloc[first], hw), codes)


def _roofline_outcomes(rows: pd.DataFrame, hw: Any) -> pd.DataFrame:
    b = roofline(rows, hw)
    t = b["t_lower_s"].to_numpy()
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    out = pd.DataFrame({"kernel_s": t, "overhead_s": 0.0, "cycles": t * hw.clock_MHz * 1e6,
                        "bytes_dram": nbytes, "bytes_l2": np.nan, "bytes_sram": np.nan,
                        "bound": b["bound"].array, "ctas_per_sm": np.nan, "waves": np.nan})
    for u in UNITS:
        out[f"util_{u}"] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        out["util_dram"] = np.where(t > 0, b["t_mem_s"].to_numpy() / t, 0.0)
    for p in BODY_PARTS:  # the whole time is its bound's part
        out[f"part_{p}_s"] = np.where(b["bound"].to_numpy() == p, t, 0.0)
    out["energy_dyn_j"] = roofline_dynamic_j(rows, hw)
    return out


def _check_bound(rows: pd.DataFrame, time_s: np.ndarray, lower: np.ndarray, hw: HardwareSpec) -> None:
    below = time_s < lower * (1 - REL)
    if below.any():
        i = int(np.flatnonzero(below)[0])
        row = rows.iloc[i]
        raise BelowBoundError(
            f"launch {row['launch_id']} ({row['kernel']}, op {row['op']}) on {hw.name}: simulated "
            f"{time_s[i] * 1e6:.4f} us is below its residency-aware roofline bound "
            f"{lower[i] * 1e6:.4f} us ({int(below.sum())} launch(es) below)")


def first_of_codes(codes: np.ndarray) -> np.ndarray:
    """The first row of each code, for codes numbered in order of first appearance (keys.distinct)."""
    return np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)


def finish(rows: pd.DataFrame, per: Broadcast | pd.DataFrame, hw: HardwareSpec,
           params: SimParams | None = None) -> LaunchTable:
    """The run's per-launch table: the replay's outcomes on one timeline beside the roofline (energy
    priced with `params`' power model, default the shipped one)."""
    return LaunchTable(rows, per if isinstance(per, Broadcast) else Broadcast(per, None), hw, params)


class LaunchTable:
    """Per-launch results, compact: the replay's outcomes once per distinct launch, and per launch
    only time_s, the roofline terms and the launch id. `table["time_s"]` (any LAUNCH_COLUMNS
    name) is one column as a Series; `frame()` the whole DataFrame, built on demand."""

    def __init__(self, rows: pd.DataFrame, per: Broadcast, hw: HardwareSpec,
                 params: SimParams | None = None) -> None:
        self.per, self.index = per, rows.index
        self.launch_id = rows["launch_id"].to_numpy()
        keyed = None if per.codes is None else (first_of_codes(per.codes), per.codes)
        _, _, self.t_math, self.t_mem, self.t_lower = roofline_terms(rows, hw, resident=True, keyed=keyed)
        self.schedule: PipelineSchedule | None = None
        if "end_s" in per.per_key:  # a step model: ends come from overlapped steps, shares not floored
            self.end = np.asarray(self._outcome("end_s"), dtype=float)
            self.time_s = np.diff(self.end, prepend=0.0)
        else:
            raw = self._outcome("kernel_s") + self._outcome("overhead_s")
            if isinstance(hw, GpuSpec):  # below the residency-aware bound is a model error
                _check_bound(rows, raw, self.t_lower, hw)
                self.time_s = raw
            else:  # the NPU launch model: its bound (no SRAM residency credit) is a floor
                self.time_s = np.maximum(raw, self.t_lower)
            # the stages' timelines (mpsim/sim/pipeline.py): back to back on one stage or one batch
            self.schedule = schedule(rows, self.time_s)
            self.end = self.schedule.end
        dynamic = dynamic_energy_j(per.per_key, hw, params)  # per distinct launch, then per launch
        self.energy_j = (dynamic if per.codes is None else dynamic[per.codes]) + static_w(hw) * self.time_s

    def __len__(self) -> int:
        return len(self.index)

    def _outcome(self, name: str) -> Any:
        values = self.per.per_key[name].array
        if self.per.codes is None:
            return values if isinstance(values, pd.Categorical) else values.to_numpy()
        if isinstance(values, pd.Categorical):
            return pd.Categorical.from_codes(values.codes[self.per.codes], dtype=values.dtype)
        return values.to_numpy()[self.per.codes]

    def column(self, name: str) -> Any:
        """One of LAUNCH_COLUMNS as an array aligned with the rows."""
        start = None
        if name in ("start_s", "busy_start_s"):
            start = (self.schedule.start if self.schedule is not None
                     else np.concatenate([[0.0], self.end[:-1]]))
        if name in ("busy_start_s", "busy_end_s") and name in self.per.per_key:
            return self._outcome(name)
        if name in ("part_launch_s", "part_latency_s"):
            launch = self._outcome("overhead_s")
            if name == "part_launch_s":
                return launch
            return latency_part(self.time_s, [self._outcome(f"part_{p}_s") for p in BODY_PARTS],
                                launch)
        own = {"launch_id": self.launch_id, "time_s": self.time_s, "t_math_s": self.t_math,
               "t_mem_s": self.t_mem, "t_lower_s": self.t_lower,
               "end_s": self.end, "busy_end_s": self.end, "start_s": start, "busy_start_s": start,
               "energy_j": self.energy_j}
        return own[name] if name in own else self._outcome(name)

    def __getitem__(self, name: str) -> pd.Series:
        return pd.Series(self.column(name), index=self.index, name=name, copy=False)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({c: self.column(c) for c in LAUNCH_COLUMNS}, index=self.index, copy=False)


def rows_and_workload(t: Trace | pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """Rows plus (batch, gen_len) from the trace's metadata, else inferred from the rows."""
    rows = t.rows if isinstance(t, Trace) else t
    wl = t.meta.workload if isinstance(t, Trace) else {}
    if len(rows) == 0:
        raise MpsimInputError("the trace has no launches")
    if "batch" in wl and "gen_len" in wl:
        return rows, int(wl["batch"]), int(wl["gen_len"])
    decode = rows["phase"] == "decode"
    gen_len = int(rows.loc[decode, "step"].max()) + 1 if decode.any() else 1
    batches = rows["batch"].dropna()
    mbs = rows["micro_batch"].dropna() if "micro_batch" in rows else pd.Series([], dtype="Int64")
    micro = int(mbs.max()) + 1 if len(mbs) else 1  # micro-batches of batch/M sequences each
    return rows, int(batches.max()) * micro if len(batches) else 1, gen_len
