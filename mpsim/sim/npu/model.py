"""One launch alone on an NPU (`mpsim.sim.replay.simulate_launch`, calibration): a one-operator step.

Alone, nothing overlaps it: the dispatch comes first (`overhead_s`), then the operator's DMA, decode,
matrix and vector work from a cold start (`cycles`). Traces replay through the step model instead
(mpsim/sim/npu/replay.py), where operators overlap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpsim.hw_models.schema import NpuSpec
from mpsim.sim.npu.kernel_model import op_work
from mpsim.sim.npu.rates import npu_rates
from mpsim.sim.npu.step import PART_NAMES, STEP_UTILS, simulate_step
from mpsim.sim.params import SimParams
from mpsim.sim.result import LaunchOutcome


def simulate_npu_launch(row: Mapping[str, Any], hw: NpuSpec, p: SimParams,
                        resident: float = 0.0) -> LaunchOutcome:
    """Cycles, bytes per level, unit utilization and bound of one launch on an NPU, on its own.

    `resident`: bytes of its activation input already in SRAM (the previous launch's output).
    """
    r = npu_rates(hw)
    out = simulate_step([op_work(row, r, p, resident)], r, p, hw.energy, isolated=True)
    c = out.columns
    body_s = float(c["end"][0] - c["overhead"][0])
    return LaunchOutcome(
        cycles=body_s * r.clock_hz, clock_hz=r.clock_hz, overhead_s=float(c["overhead"][0]),
        bytes_dram=float(c["bytes_dram"][0]), bytes_sram=float(c["bytes_sram"][0]),
        util={u: float(c[f"util_{u}"][0]) for u in STEP_UTILS}, bound=out.bound[0],
        parts={name[5:]: float(c[name][0]) for name in PART_NAMES})
