"""Replaying a trace's rows on a hardware model: the per-launch tables of the two performance models.

`replay_sim` (the SimPy GPU or NPU model, by the hardware's kind) simulates each distinct launch key
once (mpsim.sim.keys) through the memo (mpsim.sim.memo) and broadcasts the outcomes to every row;
`replay_roofline` gives each launch max(t_math, t_mem). `finish` lays the launches back to back in
launch order on one timeline (all streams serialized) next to their roofline bounds. Every row
carries its roofline bound. On a GPU the bound is residency-aware (mpsim/sim/roofline.py: t_mem
counts only the DRAM bytes the launch must move after what the previous launch left in L2) and a
simulated time below it is a model error, raised naming the launch (`BelowBoundError`), never
clamped. The NPU's launch model keeps its bound as a floor (its bound counts no SRAM residency).
On an NPU the SimPy model runs whole steps instead (mpsim/sim/npu/replay.py): operators overlap,
each launch's `time_s` is its end minus the previous launch's end (no floor: an overlapped
launch's share of the step can be below its own bound; the step as a whole is not), and the
overlapped interval is `busy_start_s`..`busy_end_s`. Every model's rows get `energy_j`
(mpsim/sim/energy.py).
The registry and the one entry point, `mpsim.sim.simulate`, are in mpsim/sim/registry.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuSpec
from mpsim.sim.energy import launch_energy_j, roofline_dynamic_j
from mpsim.sim.gpu.memory import usable_l2
from mpsim.sim.gpu.model import simulate_gpu_launch
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.keys import key_text, launch_keys, rep_row
from mpsim.sim.memo import LaunchMemo, namespace
from mpsim.sim.npu.model import simulate_npu_launch
from mpsim.sim.npu.rates import npu_rates
from mpsim.sim.npu.replay import npu_resident_cap, replay_npu
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.result import LAUNCH_COLUMNS, UNITS, LaunchOutcome
from mpsim.sim.roofline import roofline
from mpsim.traces.trace import Trace


def simulate_launch(row: Mapping[str, Any], hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS,
                    resident: float = 0.0) -> LaunchOutcome:
    """One launch (a trace-row mapping) on `hw`, with no memo."""
    if isinstance(hw, GpuSpec):
        return simulate_gpu_launch(row, hw, params, resident)
    if isinstance(hw, NpuSpec):
        return simulate_npu_launch(row, hw, params, resident)
    raise MpsimInputError(f"no simulator for hardware of kind {hw.kind!r}; expected gpu or npu")


def resident_cap(hw: HardwareSpec, params: SimParams) -> float:
    """Bytes of a launch's output that stay resident for the next one (the GPU's usable L2, the
    NPU's activation SRAM)."""
    if isinstance(hw, NpuSpec):
        return npu_resident_cap(npu_rates(hw))
    return usable_l2(gpu_rates(hw, params), params) if isinstance(hw, GpuSpec) else 0.0


def replay_sim(rows: pd.DataFrame, hw: Any, params: SimParams, memo: LaunchMemo) -> pd.DataFrame:
    if isinstance(hw, NpuSpec):
        return replay_npu(rows, hw, params, memo)
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


def _broadcast(outcomes: list[LaunchOutcome], codes: np.ndarray) -> pd.DataFrame:
    def col(f: Callable[[LaunchOutcome], Any], dtype: Any = np.float64) -> np.ndarray:
        return np.asarray([f(o) for o in outcomes], dtype=dtype)[codes]

    out = {
        "kernel_s": col(lambda o: o.kernel_s), "overhead_s": col(lambda o: o.overhead_s),
        "cycles": col(lambda o: o.cycles), "bytes_dram": col(lambda o: o.bytes_dram),
        "bytes_l2": col(lambda o: o.bytes_l2), "bytes_sram": col(lambda o: o.bytes_sram),
        "bound": _bounds(outcomes, codes), "ctas_per_sm": col(lambda o: o.ctas_per_sm),
        "waves": col(lambda o: o.waves),
    }
    for u in UNITS:
        out[f"util_{u}"] = np.asarray([o.util.get(u, np.nan) for o in outcomes], dtype=float)[codes]
    return pd.DataFrame(out)


def _bounds(outcomes: list[LaunchOutcome], codes: np.ndarray) -> pd.Categorical:
    """The bound of every row as a categorical (a few names over ~10^6 rows)."""
    names, index = np.unique([o.bound for o in outcomes], return_inverse=True)
    return pd.Categorical.from_codes(index[codes], categories=names)


def replay_roofline(rows: pd.DataFrame, hw: Any, params: SimParams,
                    memo: LaunchMemo) -> pd.DataFrame:
    b = roofline(rows, hw)
    t = b["t_lower_s"].to_numpy()
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    out = pd.DataFrame({"kernel_s": t, "overhead_s": 0.0, "cycles": t * hw.clock_MHz * 1e6,
                        "bytes_dram": nbytes, "bytes_l2": np.nan, "bytes_sram": np.nan,
                        "bound": b["bound"].to_numpy(), "ctas_per_sm": np.nan, "waves": np.nan})
    for u in UNITS:
        out[f"util_{u}"] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        out["util_dram"] = np.where(t > 0, b["t_mem_s"].to_numpy() / t, 0.0)
    out["energy_dyn_j"] = roofline_dynamic_j(rows, hw)
    return out


class BelowBoundError(RuntimeError):
    """A simulated launch beat its residency-aware roofline bound: a bug in a performance model."""


REL = 1e-9  # float noise of summing cycles in different orders


def _check_bound(rows: pd.DataFrame, time_s: np.ndarray, lower: np.ndarray, hw: HardwareSpec) -> None:
    below = time_s < lower * (1 - REL)
    if below.any():
        i = int(np.flatnonzero(below)[0])
        row = rows.iloc[i]
        raise BelowBoundError(
            f"launch {row['launch_id']} ({row['kernel']}, op {row['op']}) on {hw.name}: simulated "
            f"{time_s[i] * 1e6:.4f} us is below its residency-aware roofline bound "
            f"{lower[i] * 1e6:.4f} us ({int(below.sum())} launch(es) below)")


def finish(rows: pd.DataFrame, per: pd.DataFrame, hw: HardwareSpec) -> pd.DataFrame:
    bounds = roofline(rows, hw, resident=True)
    raw = per["kernel_s"].to_numpy() + per["overhead_s"].to_numpy()
    lower = bounds["t_lower_s"].to_numpy()
    if "end_s" in per:  # a step model: ends come from overlapped steps, shares are not floored
        end = per["end_s"].to_numpy(dtype=float)
        time_s = np.diff(end, prepend=0.0)
    elif isinstance(hw, GpuSpec):
        _check_bound(rows, raw, lower, hw)
        time_s = raw
        end = np.cumsum(time_s)
    else:  # the NPU launch model: unchanged, its bound (no SRAM residency credit) is a floor
        time_s = np.maximum(raw, lower)
        end = np.cumsum(time_s)
    start = np.concatenate([[0.0], end[:-1]])
    busy = {"busy_start_s": start, "busy_end_s": end} if "busy_start_s" not in per else {}
    out = per.assign(launch_id=rows["launch_id"].to_numpy(), start_s=start, end_s=end,
                     time_s=time_s, t_math_s=bounds["t_math_s"].to_numpy(),
                     t_mem_s=bounds["t_mem_s"].to_numpy(), t_lower_s=lower,
                     energy_j=launch_energy_j(per, rows, hw, time_s), **busy)
    out = out[list(LAUNCH_COLUMNS)]
    out.index = rows.index
    return out


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
    return rows, int(batches.max()) if len(batches) else 1, gen_len
