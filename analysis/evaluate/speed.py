"""Speed of a generation's own precision schedule on modeled hardware.

Every sequence of an evaluated generation has its own widths (a scheduler may switch each at a
different step). Each is spelled as the policy that replays it (`ap4-4@S-3`, mpsim.engine.scheduler
.log_policy), synthesized as a batch-1 trace of the evaluation's workload and simulated with
`mpsim.sim.simulate`; a row's TTFT and time per token are the means over its sequences and its
tokens/s is gen_len over the mean total time. Each distinct spelling is simulated once per hardware,
with one in-memory memo (an evaluation writes nothing outside its --out folder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec
from mpsim.policy import parse_policy
from mpsim.sim import check_model, simulate
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.summary import RunSummary
from mpsim.synth import synthesize
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
        self.perf_model = check_model(perf_model)
        self._memo = LaunchMemo(None)
        self._done: dict[tuple[str, str], RunSummary] = {}

    def summary(self, spelling: str, hw: HardwareSpec) -> RunSummary:
        key = (spelling, hw.name)
        if key not in self._done:
            trace = synthesize(self.spec, parse_policy(spelling), self.workload)
            self._done[key] = simulate(trace, hw, self.perf_model, memo=self._memo).summary
        return self._done[key]

    def speed(self, spellings: Sequence[str], hw: HardwareSpec) -> Speed:
        """Mean over the sequences (one spelling each) of their simulated runs."""
        runs = [self.summary(s, hw) for s in spellings]
        total = float(np.mean([r.total_s for r in runs]))
        return Speed(float(np.mean([r.ttft_s for r in runs])), float(np.mean([r.tpot_mean_s for r in runs])),
                     total, self.workload.batch * self.workload.gen_len / total)
