"""Joules per unit of the work each performance model reports, from a hardware file's `energy:` block.

Plain Python (no numpy): mpsim/sim/energy.py applies these to whole columns, and `mpsim op`
(mpsim/sim/launch.py) to one launch, so both price energy from one set of constants. NaN when the
file has no `energy:` block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mpsim.hw_models.schema import GpuEnergy, GpuSpec, HardwareSpec
from mpsim.sim.gpu.power import base_hz, core_dynamic_j, dram_dynamic_j, tensor_energy_share
from mpsim.sim.params import SimParams
from mpsim.sim.roofline import MATRIX_OPS

PJ = 1e-12


def static_w(hw: HardwareSpec) -> float:
    return hw.energy.static_W if hw.energy is not None else math.nan


def roofline_joules_per_unit(hw: HardwareSpec) -> dict[str, float]:
    """J per analytic byte moved, per matrix FLOP, per other FLOP."""
    e = hw.energy
    if e is None:
        return dict.fromkeys(("byte", "matrix_flop", "other_flop"), math.nan)
    if isinstance(e, GpuEnergy):
        per_matrix, per_other = e.tensor_pJ_per_flop, e.cuda_pJ_per_op
    else:
        per_matrix, per_other = e.mac_pJ["fp16"] / 2, e.vector_pJ_per_op
    return {"byte": 8 * e.dram_pJ_per_bit * PJ, "matrix_flop": per_matrix * PJ, "other_flop": per_other * PJ}


def _zero_nan(x: float) -> float:
    return 0.0 if x != x else x


def gpu_launch_dynamic_j(per: Mapping[str, Any], hw: GpuSpec, params: SimParams) -> float:
    """One GPU SimPy launch's dynamic energy (energy.gpu_components_j summed, for one launch)."""
    if hw.energy is None:
        return math.nan
    cycles, body = float(per["cycles"]), float(per["kernel_s"])
    clock = cycles / body if body > 0 else base_hz(hw)
    return (dram_dynamic_j(hw, float(per["bytes_dram"]))
            + core_dynamic_j(hw, params, cycles, clock,
                             tensor_energy_share(_zero_nan(float(per["util_tensor"])),
                                                 _zero_nan(float(per.get("util_tensor_fp8", 0.0))), params),
                             _zero_nan(float(per["util_cuda"])), _zero_nan(float(per["bytes_l2"]))))


def roofline_launch_dynamic_j(row: Mapping[str, Any], hw: HardwareSpec) -> float:
    """One roofline launch's dynamic energy (energy.roofline_dynamic_j, for one launch)."""
    j = roofline_joules_per_unit(hw)
    flop = j["matrix_flop"] if row["op"] in MATRIX_OPS else j["other_flop"]
    return float(row["bytes_read"] + row["bytes_written"]) * j["byte"] + float(row["flops"]) * flop
