"""Performance models that replay traces: the roofline baseline and the SimPy simulators.

The one door: `simulate(trace, hw, model="sim"|"roofline") -> SimResult` (mpsim/sim/registry.py),
with `PERF_MODELS`, `check_model` and `model_version` beside it. docs/simulator.md describes the
models.

The names below load on first use (PEP 562), not when the package is imported: importing a light
submodule (mpsim.sim.launch, what `mpsim op` prices one launch with) must not load pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mpsim.sim.registry import (
        DEFAULT_CACHE,
        PERF_MODELS,
        PerfModel,
        check_model,
        model_version,
        register_model,
        simulate,
    )
    from mpsim.sim.result import SimResult

_HOME = {"DEFAULT_CACHE": "registry", "PERF_MODELS": "registry", "PerfModel": "registry",
         "check_model": "registry", "model_version": "registry", "register_model": "registry",
         "simulate": "registry", "SimResult": "result"}

__all__ = ["DEFAULT_CACHE", "PERF_MODELS", "PerfModel", "SimResult", "check_model", "model_version",
           "register_model", "simulate"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'mpsim.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mpsim.sim.{_HOME[name]}"), name)
