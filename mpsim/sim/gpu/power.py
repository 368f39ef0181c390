"""Board power of a GPU launch and the power-limited clock it implies (issue 24).

One formula for every GPU, inputs from the hardware file (datasheet TDP, base and boost clocks, the
`energy:` block's energies) and two device-independent constants of SimParams:

    P(f) = static_W + dram_W + overhead x s(f) x f x A,      s(f) = (V(f) / V(f_base))^2
    V(f) / V(f_base) = 1 + voltage_slope x max(0, f - f_base) / f_base

A (J per SM-clock cycle at the base clock's voltage) is the launch's per-cycle work priced at the
file's energies: tensor FLOPs x tensor_pJ_per_flop + CUDA-core lane-ops x cuda_pJ_per_op + L2 bytes
x l2_pJ_per_byte; DRAM traffic costs dram_pJ_per_bit per bit and does not follow the SM clock or its
voltage. Below the base clock the voltage stays at its floor, so power falls linearly with f (an
assumption: DVFS tables hold a minimum voltage). The sustained clock is the highest f <= boost
with P(f) <= TDP (model.py runs the launch again at it until the clock settles). The energy model
(mpsim/sim/energy.py) prices every launch with this same formula at the clock it ran at, so a
power-limited launch's average power is the TDP.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeVar

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec
from mpsim.sim.params import SimParams

if TYPE_CHECKING:  # `mpsim op` loads no numpy (tests/commands/test_startup.py)
    import numpy as np

PJ = 1e-12
Share = TypeVar("Share", float, "np.ndarray")


def base_hz(hw: GpuSpec) -> float:
    """The datasheet base clock; the power model needs it (one clear error when the file lacks it)."""
    if hw.compute.base_clock_MHz is None:
        raise MpsimInputError(f"{hw.name}: compute.base_clock_MHz is missing; the power-limited clock "
                              "needs the datasheet base clock (MHz) next to boost_clock_MHz")
    return hw.compute.base_clock_MHz * 1e6


def voltage_sq(hw: GpuSpec, p: SimParams, clock_hz: float) -> float:
    """(V(f) / V(f_base))^2: the factor the file's energies (stated at the base clock's voltage) take
    at clock f."""
    fb = base_hz(hw)
    v = 1.0 + p.voltage_slope * max(0.0, clock_hz - fb) / fb
    return v * v


def core_joules_per_cycle(hw: GpuSpec) -> dict[str, float]:
    """J per cycle of a fully busy tensor pipe (fp16 rate, every SM), per cycle of fully busy CUDA-core
    lanes, and J per L2 byte, at the base clock's voltage and before SimParams.power_overhead. NaN
    when the file has no `energy:` block."""
    e = hw.energy
    if e is None:
        return dict.fromkeys(("tensor", "cuda", "l2"), math.nan)
    sms = hw.compute_units
    return {"tensor": sms * hw.tensor_core.flops_per_clock_per_SM["fp16"] * e.tensor_pJ_per_flop * PJ,
            "cuda": sms * hw.cuda_core.fp32_flops_per_clock_per_SM / 2 * e.cuda_pJ_per_op * PJ,
            "l2": e.l2_pJ_per_byte * PJ}


def tensor_energy_share(util_tensor: Share, util_tensor_fp8: Share, p: SimParams) -> Share:
    """The tensor pipe's busy share weighted by energy per busy cycle: fp8 cycles (a part of the
    busy share) at SimParams.fp8_tensor_energy times a 16-bit cycle's energy. One launch (floats) or
    a table's columns (arrays), NaN already read as none by the caller."""
    return util_tensor + (p.fp8_tensor_energy - 1.0) * util_tensor_fp8


def core_dynamic_j(hw: GpuSpec, p: SimParams, cycles: float, clock_hz: float, util_tensor: float,
                   util_cuda: float, bytes_l2: float) -> float:
    """The SM side's dynamic energy of `cycles` cycles at `clock_hz` (tensor and CUDA-core busy shares
    of those cycles, L2 bytes moved)."""
    j = core_joules_per_cycle(hw)
    per_cycle = util_tensor * j["tensor"] + util_cuda * j["cuda"]
    return p.power_overhead * voltage_sq(hw, p, clock_hz) * (per_cycle * cycles + bytes_l2 * j["l2"])


def dram_dynamic_j(hw: GpuSpec, bytes_dram: float) -> float:
    return math.nan if hw.energy is None else bytes_dram * 8 * hw.energy.dram_pJ_per_bit * PJ


def sustained_clock(hw: GpuSpec, p: SimParams, core_j_per_cycle: float, dram_w: float) -> float:
    """The highest clock <= boost whose board power stays within the TDP, for a launch whose SM side
    spends `core_j_per_cycle` (at the base voltage, power_overhead included) and whose DRAM traffic
    draws `dram_w`. Boost when no TDP is known or the work fits at boost."""
    boost = hw.compute.boost_clock_MHz * 1e6
    e = hw.energy
    if e is None or core_j_per_cycle <= 0:
        return boost
    budget = e.tdp_W - e.static_W - dram_w

    def power(f: float) -> float:
        return core_j_per_cycle * f * voltage_sq(hw, p, f)

    if power(boost) <= budget:
        return boost
    fb = base_hz(hw)
    if power(fb) >= budget:  # voltage at its floor: power linear in f
        return max(budget / core_j_per_cycle, 0.01 * boost)  # floor: numerical guard only
    lo, hi = fb, boost
    for _ in range(40):  # power(f) is increasing: bisection to 1e-12 of the span
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if power(mid) <= budget else (lo, mid)
    return lo
