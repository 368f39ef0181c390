"""Speed of a generation's own precision schedule on modeled hardware.

Every sequence of an evaluated generation has its own widths (a scheduler may switch each at a
different step). Each is spelled as the policy that replays it (`ap4-4@S-3`, mpsim.engine.scheduler
.log_policy), synthesized as a batch-1 trace of the evaluation's workload and simulated with
`mpsim.sim.engine.simulate_trace`; a row's TTFT and time per token are the means over its sequences
and its tokens/s is gen_len over the mean total time. Each distinct spelling is simulated once per
hardware. If the simulator cannot be imported the roofline model stands in, and the table says so
in its `perf_model` column.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec
from mpsim.policy import parse_policy
from mpsim.sim.summary import RunSummary, summarize
from mpsim.synth import synthesize
from mpsim.traces.trace import Trace
from mpsim.workload import Workload


@dataclass(frozen=True)
class Speed:
    ttft_s: float
    tpot_s: float
    total_s: float
    tokens_per_s: float


class SpeedModel:
    """Simulated run summaries of policy spellings on one model spec and workload, memoized."""

    def __init__(self, spec: ModelSpec, workload: Workload, perf_model: str = "sim") -> None:
        self.spec, self.workload = spec, workload
        self.perf_model, self._simulate = _performance_backend(perf_model)
        self._memo = _new_memo()
        self._done: dict[tuple[str, str], RunSummary] = {}

    def summary(self, spelling: str, hw: HardwareSpec) -> RunSummary:
        key = (spelling, hw.name)
        if key not in self._done:
            trace = synthesize(self.spec, parse_policy(spelling), self.workload)
            self._done[key] = self._simulate(trace, hw, self.perf_model, self._memo)
        return self._done[key]

    def speed(self, spellings: Sequence[str], hw: HardwareSpec) -> Speed:
        """Mean over the sequences (one spelling each) of their simulated runs."""
        runs = [self.summary(s, hw) for s in spellings]
        total = float(np.mean([r.total_s for r in runs]))
        return Speed(float(np.mean([r.ttft_s for r in runs])), float(np.mean([r.tpot_mean_s for r in runs])),
                     total, self.workload.batch * self.workload.gen_len / total)


SimFn = Callable[[Trace, HardwareSpec, str, Any], RunSummary]


def _performance_backend(name: str) -> tuple[str, SimFn]:
    """(model name actually used, simulate(trace, hw, model, memo) -> RunSummary)."""
    try:
        from mpsim.sim.engine import simulate_trace
    except ImportError as exc:
        print(f"mpsim evaluate: the simulator is unavailable ({exc}); using the roofline model",
              file=sys.stderr)
        return "roofline (simulator unavailable)", _roofline_summary

    def run(trace: Trace, hw: HardwareSpec, model: str, memo: Any) -> RunSummary:
        return simulate_trace(trace, hw, model, memo=memo).summary

    return name, run


def _roofline_summary(trace: Trace, hw: HardwareSpec, model: str, memo: Any) -> RunSummary:
    from mpsim.sim.roofline import roofline

    rows = trace.rows
    wl = trace.meta.workload
    return summarize(rows, roofline(rows, hw)["t_lower_s"].to_numpy(), int(wl["batch"]), int(wl["gen_len"]))


def _new_memo() -> Any:
    try:
        from mpsim.sim.memo import LaunchMemo
    except ImportError:
        return None
    return LaunchMemo(None)  # in memory: an evaluation writes nothing outside its --out folder
