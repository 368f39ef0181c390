"""Energy per launch, beside the time models: per-access and per-operation energies plus static power.

energy_j = dynamic + static_W x time_s, where time_s is the launch's share of the run's wall time, so
the sum over a run is the run's energy and its mean power is energy / time. Dynamic energy counts
what each model already reports (the constants are the hardware file's `energy:` block, their
sources in the file):
- GPU, SimPy model: DRAM bytes x pJ/bit x 8 + power_overhead x (V(f)/V(f_base))^2 x (L2 bytes x
  pJ/B + tensor FLOPs x pJ/FLOP + CUDA-core lane-ops x pJ/op), the FLOPs and lane-ops being the
  units' busy share of the launch's cycles at their peak rate per cycle (`util_tensor`,
  `util_cuda`: padded MMA work and dequantization included) and f the clock it ran at (cycles /
  kernel_s). It is the power model that sets the power-limited clock (mpsim/sim/gpu/power.py), so a
  power-limited launch draws the TDP. Nothing of the GPU time model is touched: energy reads its
  output columns.
- NPU, SimPy model: DRAM bytes, SRAM bytes, MACs, decoded weights by stored width and vector ops of
  each launch, counted by the step model (mpsim/sim/npu/step.py, `npu_dynamic_j`).
- roofline (either kind): the analytic DRAM bytes, matrix FLOPs (gemm, attention) and other FLOPs.
A hardware file without an `energy:` block gives NaN energy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuEnergy
from mpsim.sim.energy_costs import PJ, roofline_joules_per_unit
from mpsim.sim.gpu.power import base_hz, core_joules_per_cycle, tensor_energy_share
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.roofline import MATRIX_OPS

if TYPE_CHECKING:
    import pandas as pd


def _f(column: Any) -> np.ndarray:
    """A column (a Series, an array or a list of one launch's values) as floats."""
    return np.asarray(column, dtype=float)


def gpu_components_j(per: Any, hw: GpuSpec, params: SimParams = DEFAULT_PARAMS) -> dict[str, np.ndarray]:
    """Dynamic energy of GPU SimPy launches by part (dram, l2, tensor, cuda), from their bytes, unit
    busy shares and the clock they ran at (cycles / kernel_s), priced by the power model that sets
    that clock (mpsim/sim/gpu/power.py: the file's energies x power_overhead x (V(f)/V(f_base))^2 on
    the SM side)."""
    cycles = _f(per["cycles"])
    body = _f(per["kernel_s"])
    if hw.energy is None:
        nan = np.full(len(cycles), np.nan)
        return {"dram": nan, "l2": nan, "tensor": nan, "cuda": nan}
    with np.errstate(divide="ignore", invalid="ignore"):
        clock = np.where(body > 0, cycles / np.where(body > 0, body, 1.0), base_hz(hw))
    fb = base_hz(hw)
    v = 1.0 + params.voltage_slope * np.maximum(0.0, clock - fb) / fb
    side = params.power_overhead * v * v
    j = core_joules_per_cycle(hw)
    return {
        "dram": _f(per["bytes_dram"]) * 8 * hw.energy.dram_pJ_per_bit * PJ,
        "l2": side * np.nan_to_num(_f(per["bytes_l2"])) * j["l2"],
        "tensor": side * tensor_energy_share(np.nan_to_num(_f(per["util_tensor"])),
                                             np.nan_to_num(_fp8_share(per, len(cycles))), params)
        * cycles * j["tensor"],
        "cuda": side * np.nan_to_num(_f(per["util_cuda"])) * cycles * j["cuda"],
    }


def _fp8_share(per: Any, n: int) -> np.ndarray:
    """The launches' fp8 tensor share (a table written before the column existed: none)."""
    return _f(per["util_tensor_fp8"]) if "util_tensor_fp8" in per else np.zeros(n)


def gpu_dynamic_j(per: Any, hw: GpuSpec, params: SimParams = DEFAULT_PARAMS) -> np.ndarray:
    """Dynamic energy of GPU SimPy launches (the sum of gpu_components_j)."""
    parts = gpu_components_j(per, hw, params)
    return parts["dram"] + parts["l2"] + parts["tensor"] + parts["cuda"]


def energy_breakdown(launches: pd.DataFrame, hw: HardwareSpec, model: str) -> dict[str, np.ndarray]:
    """Per-launch energy by part: dram, on-chip memory (L2 or SRAM), compute, static.

    `launches` is a SimResult's table; compute is what remains of energy_j (MACs, decoder, vector
    unit; tensor and CUDA cores) after the memories and static power."""
    e = hw.energy
    total = launches["energy_j"].to_numpy(dtype=float)
    if e is None:
        nan = np.full(len(launches), np.nan)
        return {"dram": nan, "onchip": nan, "compute": nan, "static": nan}
    static = e.static_W * launches["time_s"].to_numpy(dtype=float)
    dram = launches["bytes_dram"].to_numpy(dtype=float) * 8 * e.dram_pJ_per_bit * PJ
    onchip = np.zeros(len(launches))
    if model == "sim" and isinstance(hw, GpuSpec):
        onchip = gpu_components_j(launches, hw)["l2"]
    elif model == "sim" and isinstance(e, NpuEnergy):
        onchip = np.nan_to_num(launches["bytes_sram"].to_numpy(dtype=float)) * e.sram_pJ_per_byte * PJ
    return {"dram": dram, "onchip": onchip, "compute": total - dram - onchip - static,
            "static": static}


def roofline_dynamic_j(rows: Any, hw: HardwareSpec) -> np.ndarray:
    """Dynamic energy of roofline launches: analytic bytes and FLOPs at the file's energies."""
    j = roofline_joules_per_unit(hw)
    nbytes = _f(rows["bytes_read"]) + _f(rows["bytes_written"])
    matrix = np.isin(np.asarray(rows["op"], dtype=object), MATRIX_OPS)
    return nbytes * j["byte"] + _f(rows["flops"]) * np.where(matrix, j["matrix_flop"], j["other_flop"])


def npu_dynamic_j(e: NpuEnergy | None, dram_bytes: float, sram_bytes: float, macs: float,
                  decoded: float, bits: int, vector_ops: float) -> float:
    """Dynamic energy of one NPU launch from the step model's counts."""
    if e is None:
        return float("nan")
    widths = sorted(e.decoder_pJ_per_weight)
    width = next((w for w in widths if w >= bits), widths[-1])
    return (dram_bytes * 8 * e.dram_pJ_per_bit + sram_bytes * e.sram_pJ_per_byte
            + macs * e.mac_pJ["fp16"] + decoded * e.decoder_pJ_per_weight[width]
            + vector_ops * e.vector_pJ_per_op) * PJ


def dynamic_energy_j(per: pd.DataFrame, hw: HardwareSpec, params: SimParams | None = None) -> np.ndarray:
    """Dynamic energy of each row of a replay's outcomes (static power is added over time_s)."""
    if "energy_dyn_j" in per:  # the NPU step model and the roofline count their own
        return per["energy_dyn_j"].to_numpy(dtype=float)
    if isinstance(hw, GpuSpec):
        return gpu_dynamic_j(per, hw, DEFAULT_PARAMS if params is None else params)
    return np.full(len(per), np.nan)

