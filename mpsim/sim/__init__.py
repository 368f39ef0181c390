"""Performance models that replay traces: the roofline baseline and the SimPy simulators.

The one door: `simulate(trace, hw, model="sim"|"roofline") -> SimResult` (mpsim/sim/registry.py),
with `PERF_MODELS`, `check_model` and `model_version` beside it. docs/simulator.md describes the
models.
"""

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

__all__ = ["DEFAULT_CACHE", "PERF_MODELS", "PerfModel", "SimResult", "check_model", "model_version",
           "register_model", "simulate"]
