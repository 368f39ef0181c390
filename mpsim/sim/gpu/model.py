"""One launch on a GPU: its CTA work, occupancy, bundles, SimPy run, and outcome."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mpsim.hw_models.schema import GpuSpec
from mpsim.sim.gpu.attention_work import attention_work
from mpsim.sim.gpu.cta import GpuLaunchSim
from mpsim.sim.gpu.gemm_work import gemm_work
from mpsim.sim.gpu.occupancy import Occupancy
from mpsim.sim.gpu.rates import GpuRates, gpu_rates
from mpsim.sim.gpu.rowwise_work import rowwise_work
from mpsim.sim.gpu.work import KernelWork, bundles
from mpsim.sim.params import SimParams
from mpsim.sim.result import LaunchOutcome, pick_bound

WorkBuilder = Callable[[Mapping[str, Any], Mapping[str, int], list[int], GpuRates, SimParams, float],
                       tuple[KernelWork, Occupancy]]
BUILDERS: dict[str, WorkBuilder] = {"gemm": gemm_work, "attention": attention_work}


def launch_config(row: Mapping[str, Any]) -> tuple[dict[str, int], list[int]]:
    """The `config` and `grid` JSON columns of a trace row, parsed."""
    try:
        cfg, grid = json.loads(str(row["config"])), json.loads(str(row["grid"]))
    except ValueError as exc:
        raise ValueError(f"launch {row.get('launch_id')}: config/grid is not JSON ({exc})") from None
    if not isinstance(cfg, dict) or not isinstance(grid, list) or not grid:
        raise ValueError(f"launch {row.get('launch_id')}: config must be a JSON object and grid a "
                         f"non-empty list, got {row['config']!r} and {row['grid']!r}")
    return cfg, [int(g) for g in grid]


def kernel_work(row: Mapping[str, Any], r: GpuRates, p: SimParams,
                resident: float) -> tuple[KernelWork, Occupancy]:
    cfg, grid = launch_config(row)
    builder = BUILDERS.get(str(row["op"]), rowwise_work)
    return builder(row, cfg, grid, r, p, resident)


def simulate_gpu_launch(row: Mapping[str, Any], hw: GpuSpec, p: SimParams,
                        resident: float = 0.0) -> LaunchOutcome:
    """Cycles, bytes per level, unit utilization and bound of one launch on `hw`."""
    r = gpu_rates(hw)
    work, occ = kernel_work(row, r, p, resident)
    slots = r.sms * occ.ctas_per_sm
    plan = bundles(work, slots, p)
    sim = GpuLaunchSim(r, work, occ.ctas_per_sm, occ.stages, p)
    cycles = sim.run(plan)
    kernel_s = cycles / r.clock_hz
    busy = sim.busy(cycles)
    return LaunchOutcome(
        cycles=cycles, clock_hz=r.clock_hz, overhead_s=r.overhead_s, bytes_dram=sim.dram.bytes,
        bytes_l2=sim.l2.bytes, util=sim.utilization(cycles),
        bound=pick_bound(busy, kernel_s, r.overhead_s), ctas_per_sm=float(occ.ctas_per_sm),
        waves=work.total_ctas / slots)
