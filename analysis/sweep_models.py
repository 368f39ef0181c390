"""Performance models a sweep or a plot can replay a trace with, by name: "roofline" and "sim".

"roofline" is the baseline of mpsim.sim.roofline (each launch takes t_lower = max(t_math, t_mem), one
after another); "sim" is the SimPy simulator's `simulate_trace`. Both come back as a `PerfRun`: per-launch
start/end/time and roofline bound aligned with the trace rows, plus the run summary. An unknown or
unavailable name fails loudly with the valid names; nothing falls back to another model.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim.roofline import roofline
from mpsim.sim.summary import RunSummary, summarize
from mpsim.traces.trace import Trace

LAUNCH_COLUMNS = ("start_s", "end_s", "time_s", "t_lower_s", "bound")


@dataclass(frozen=True)
class PerfRun:
    launches: pd.DataFrame  # LAUNCH_COLUMNS, one row per trace row, same order
    summary: RunSummary

    @property
    def lower_bound_s(self) -> float:
        return float(self.launches["t_lower_s"].sum())


PerfFn = Callable[[Trace, HardwareSpec], PerfRun]


def _batch_gen(trace: Trace) -> tuple[int, int]:
    wl = trace.meta.workload
    return int(wl.get("batch", 1)), int(wl.get("gen_len", 1))


def run_roofline(trace: Trace, hw: HardwareSpec) -> PerfRun:
    """Launches back to back, each taking its roofline bound."""
    bounds = roofline(trace.rows, hw)
    t = bounds["t_lower_s"].to_numpy(dtype=float)
    end = np.cumsum(t)
    launches = pd.DataFrame({"start_s": end - t, "end_s": end, "time_s": t, "t_lower_s": t,
                             "bound": bounds["bound"].to_numpy()})
    return PerfRun(launches, summarize(trace.rows, t, *_batch_gen(trace)))


# Where the SimPy simulator's entry point may live (the package, or its engine module), in that order;
# it is built separately and may be absent from a checkout.
SIM_MODULES = ("mpsim.sim", "mpsim.sim.engine")
SIM_FUNCTION = "simulate_trace"


def _sim_function() -> Callable[..., object] | str:
    """The simulator's entry point, or why it cannot be had."""
    why = []
    for name in SIM_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            why.append(f"cannot import {name} ({exc})")
            continue
        fn = getattr(module, SIM_FUNCTION, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
        why.append(f"{name} has no {SIM_FUNCTION}")
    return "; ".join(why)


def _simulate_trace() -> Callable[..., object]:
    fn = _sim_function()
    if isinstance(fn, str):
        raise MpsimInputError(f"performance model 'sim' is unavailable: {fn}; "
                              f"runnable here: {', '.join(available_perf_models())}")
    return fn


def run_sim(trace: Trace, hw: HardwareSpec) -> PerfRun:
    """The SimPy simulator (cycle-approximate); its launches table carries the roofline bound."""
    result = _simulate_trace()(trace, hw, model="sim")
    launches = result.launches  # type: ignore[attr-defined]
    missing = [c for c in LAUNCH_COLUMNS if c not in launches.columns]
    if missing or len(launches) != len(trace.rows):
        raise RuntimeError(f"simulate_trace returned {len(launches)} launches for {len(trace.rows)} "
                           f"rows, missing columns {missing}: the sweep needs {LAUNCH_COLUMNS}")
    return PerfRun(launches[list(LAUNCH_COLUMNS)].reset_index(drop=True),
                   result.summary)  # type: ignore[attr-defined]


def _sim_version() -> str:
    """What decides the simulator's numbers beyond its inputs: its model version and parameters."""
    from mpsim.sim.memo import MODEL_VERSION
    from mpsim.sim.params import DEFAULT_PARAMS

    return f"{MODEL_VERSION}|{DEFAULT_PARAMS.fingerprint()}"


def _sim_why_not() -> str | None:
    fn = _sim_function()
    return fn if isinstance(fn, str) else None


@dataclass(frozen=True)
class PerfModel:
    run: PerfFn
    version: Callable[[], str] = lambda: ""  # part of every point key: a new version, new points
    why_not: Callable[[], str | None] = lambda: None  # None when runnable in this checkout


# The registry: name -> model. `register_perf_model` is the one way to add to it.
PERF_MODELS: dict[str, PerfModel] = {
    "roofline": PerfModel(run_roofline, lambda: "roofline-1"),
    "sim": PerfModel(run_sim, _sim_version, _sim_why_not),
}


def register_perf_model(name: str, fn: PerfFn, version: str = "") -> None:
    """Add a performance model (a plug-in, or a test double) under a new name."""
    if name in PERF_MODELS:
        raise MpsimInputError(f"performance model {name!r} is already registered")
    PERF_MODELS[name] = PerfModel(fn, lambda: version)


def available_perf_models() -> list[str]:
    """Registered names whose implementation can run in this checkout."""
    return [name for name, m in PERF_MODELS.items() if m.why_not() is None]


def check_perf_model(name: str) -> str:
    """The name, if it is registered and runnable here; else an error listing the valid names."""
    if name not in PERF_MODELS:
        raise MpsimInputError(f"unknown performance model {name!r}; expected one of: "
                              f"{', '.join(PERF_MODELS)} (runnable here: "
                              f"{', '.join(available_perf_models())})")
    why = PERF_MODELS[name].why_not()
    if why is not None:
        raise MpsimInputError(f"performance model {name!r} is unavailable: {why}; "
                              f"runnable here: {', '.join(available_perf_models())}")
    return name


def perf_model_version(name: str) -> str:
    return PERF_MODELS[check_perf_model(name)].version()


def run_perf_model(name: str, trace: Trace, hw: HardwareSpec) -> PerfRun:
    return PERF_MODELS[check_perf_model(name)].run(trace, hw)
