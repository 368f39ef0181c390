"""The performance models by name, and the one door into them: `simulate(trace, hw, model)`.

"sim" is the SimPy model (GPU or NPU, by the hardware's kind), "roofline" the baseline (each launch
takes max(t_math, t_mem)). Every caller (the CLI's simulate, roofline and op, sweeps, evaluate,
validate, plots) comes through `simulate`, which returns a SimResult: a per-launch table aligned with
the trace rows (times, bounds, bytes per level, utilisation) and the run summary. An unknown name
fails loudly with the valid ones; nothing falls back to another model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.sim.memo import MODEL_VERSION, LaunchMemo, default_cache_dir
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import DEFAULT_PROTOCOL, Protocol, for_device
from mpsim.sim.replay import (
    Broadcast,
    finish,
    first_of_codes,
    replay_roofline,
    replay_sim,
    rows_and_workload,
)
from mpsim.sim.result import SimResult
from mpsim.sim.summary import summarize
from mpsim.traces.schema import COLLECTIVE_OPS
from mpsim.traces.trace import Trace

DEFAULT_CACHE = "default"
# A replay returns per-launch outcomes: a DataFrame aligned with the rows, or a Broadcast (one row
# per distinct launch and a code per launch).
ReplayFn = Callable[[pd.DataFrame, Any, SimParams, LaunchMemo], pd.DataFrame | Broadcast]


@dataclass(frozen=True)
class PerfModel:
    """A named performance model: its per-launch replay and the version its results carry."""

    replay: ReplayFn
    version: Callable[[], str]  # part of every sweep point key: a new version, new points
    description: str
    # whether its times are measured calls (a protocol's cost applies); the roofline is a bound
    launch_costs: bool = True


def _sim_version() -> str:
    return f"{MODEL_VERSION}|{DEFAULT_PARAMS.fingerprint()}"


PERF_MODELS: dict[str, PerfModel] = {
    "sim": PerfModel(replay_sim, _sim_version, "the SimPy simulator (GPU or NPU model)"),
    "roofline": PerfModel(replay_roofline, lambda: "roofline-1", "max(t_math, t_mem) per launch",
                          launch_costs=False),
}


def register_model(name: str, model: PerfModel) -> None:
    """Add a performance model (a plug-in, or a test double) under a new name."""
    if name in PERF_MODELS:
        raise MpsimInputError(f"performance model {name!r} is already registered")
    PERF_MODELS[name] = model


def check_model(name: str) -> str:
    """`name` if it is a registered performance model, else an error listing the valid names."""
    if name not in PERF_MODELS:
        raise MpsimInputError(f"unknown performance model {name!r}; valid: {', '.join(PERF_MODELS)}")
    return name


def model_version(name: str) -> str:
    return PERF_MODELS[check_model(name)].version()


def protocol_overhead_s(rows: pd.DataFrame, protocol: Protocol) -> np.ndarray:
    """Each launch row as one measured call under `protocol`, for the GPU kernels the row stands
    for (an FA3 row with its KV append is two); the cost itself is the protocol's (protocols.py).
    A collective row has none: its fitted time is a measured call's, gaps included (mpsim/sim/comm.py)."""
    from mpsim.sim.gpu.library import launch_kernels  # the GPU work models, only with a protocol

    kernels = np.array([launch_kernels(r) for r in rows[["kernel", "config"]].to_dict("records")],
                       dtype=float)
    cost = np.asarray(protocol.cost_s(kernels), dtype=float)
    comm = rows["op"].isin(COLLECTIVE_OPS).to_numpy(dtype=bool, na_value=False)
    return np.where(comm, 0.0, cost) if comm.any() else cost


def device_protocol(name: str, hw: HardwareSpec) -> Protocol:
    """The named protocol on `hw` (a GPU file's launch.overhead_us is its graph gap)."""
    override = hw.launch_overhead_s() if isinstance(hw, GpuSpec) else None
    return for_device(name, None if override is None else override * 1e6)


def _with_overhead(per: pd.DataFrame | Broadcast, rows: pd.DataFrame, protocol: Protocol) -> Broadcast:
    """The replay's outcomes with every launch's overhead_s replaced by `protocol`'s cost. Outcomes
    per distinct launch stay so: a launch key holds the kernel and its config, all the cost depends
    on, so the cost is computed once per key (not once per launch: 3 s of a 794k-launch replay)."""
    if isinstance(per, Broadcast) and per.codes is not None:
        reps = rows.iloc[first_of_codes(per.codes)]
        return Broadcast(per.per_key.assign(overhead_s=protocol_overhead_s(reps, protocol)), per.codes)
    frame = per.per_key if isinstance(per, Broadcast) else per
    return Broadcast(frame.assign(overhead_s=protocol_overhead_s(rows, protocol)), None)


def simulate(trace_or_rows: Trace | pd.DataFrame, hw: HardwareSpec, model: str = "sim", *,
             params: SimParams = DEFAULT_PARAMS, memo: LaunchMemo | None = None,
             cache_dir: str | Path | None = DEFAULT_CACHE, protocol: str = DEFAULT_PROTOCOL
             ) -> SimResult:
    """Replay every launch of a trace on `hw`; per-launch table aligned with the rows + summary.

    `protocol`: predict times as that measurement protocol sees them (mpsim/sim/protocols.py; `graph`
    by default): each launch is one measured call, its overhead_s the protocol's fixed cost. This is
    the one place a protocol's cost is applied to simulated launches; `kernel` gives the kernel
    bodies alone (what a caller pricing a call of several launches adds its call's cost to). It
    applies to GPU models whose times are measured calls: the roofline is a bound (no launch cost)
    and the NPU model simulates its own dispatch (hardware file), so there the result's protocol is
    None. The result says which.

    `memo`: share one LaunchMemo across calls to reuse simulated launches in memory; otherwise a
    new one is made over `cache_dir` ("default": $MPSIM_CACHE_DIR or ~/.cache/mpsim/sim; None: no
    disk cache).
    """
    start = time.perf_counter()
    device_protocol(protocol, hw)  # an unknown name fails before any work
    replay = PERF_MODELS[check_model(model)].replay
    rows, batch, gen_len = rows_and_workload(trace_or_rows)
    if memo is None:
        memo = LaunchMemo(default_cache_dir() if cache_dir == DEFAULT_CACHE else cache_dir)
    hits, misses, sim_s = memo.hits, memo.misses, memo.sim_seconds
    per_launch = replay(rows, hw, params, memo)
    memo.flush()
    priced = PERF_MODELS[model].launch_costs and isinstance(hw, GpuSpec)
    if priced:
        per_launch = _with_overhead(per_launch, rows, device_protocol(protocol, hw))
    launches = finish(rows, per_launch, hw, params)
    prompt = trace_or_rows.meta.workload.get("prompt_len") if isinstance(trace_or_rows, Trace) else None
    summary = summarize(rows, launches["time_s"].to_numpy(), batch, gen_len,
                        launches["energy_j"].to_numpy(), None if prompt is None else int(prompt),
                        launches.schedule)
    stats = {"launches": len(rows), "memo_hits": memo.hits - hits,
             "simulated": memo.misses - misses, "simpy_s": memo.sim_seconds - sim_s,
             "wall_s": time.perf_counter() - start}
    return SimResult(launches, summary, model, hw.name, stats, protocol if priced else None)
