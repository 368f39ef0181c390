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
from mpsim.sim.roofline import MATRIX_OPS

PJ = 1e-12


def static_w(hw: HardwareSpec) -> float:
    return hw.energy.static_W if hw.energy is not None else math.nan


def gpu_joules_per_unit(hw: GpuSpec) -> dict[str, float]:
    """J per DRAM byte, per L2 byte, per second of full tensor-core busy, per second of full
    CUDA-core busy (the busy shares are `util_tensor`, `util_cuda` of the kernel body)."""
    e = hw.energy
    if e is None:
        return dict.fromkeys(("bytes_dram", "bytes_l2", "tensor_s", "cuda_s"), math.nan)
    lanes = hw.compute_units * hw.cuda_core.fp32_flops_per_clock_per_SM / 2 * hw.clock_MHz * 1e6
    return {"bytes_dram": 8 * e.dram_pJ_per_bit * PJ, "bytes_l2": e.l2_pJ_per_byte * PJ,
            "tensor_s": hw.matrix_peak_flops("fp16") * e.tensor_pJ_per_flop * PJ,
            "cuda_s": lanes * e.cuda_pJ_per_op * PJ}


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


def gpu_launch_dynamic_j(per: Mapping[str, Any], hw: GpuSpec) -> float:
    """One GPU SimPy launch's dynamic energy (energy.gpu_components_j summed, for one launch)."""
    j = gpu_joules_per_unit(hw)
    body = float(per["kernel_s"])
    return (float(per["bytes_dram"]) * j["bytes_dram"] + _zero_nan(float(per["bytes_l2"])) * j["bytes_l2"]
            + _zero_nan(float(per["util_tensor"])) * body * j["tensor_s"]
            + _zero_nan(float(per["util_cuda"])) * body * j["cuda_s"])


def roofline_launch_dynamic_j(row: Mapping[str, Any], hw: HardwareSpec) -> float:
    """One roofline launch's dynamic energy (energy.roofline_dynamic_j, for one launch)."""
    j = roofline_joules_per_unit(hw)
    flop = j["matrix_flop"] if row["op"] in MATRIX_OPS else j["other_flop"]
    return float(row["bytes_read"] + row["bytes_written"]) * j["byte"] + float(row["flops"]) * flop
