"""Energy per launch, beside the time models: per-access and per-operation energies plus static power.

energy_j = dynamic + static_W x time_s, where time_s is the launch's share of the run's wall time, so
the sum over a run is the run's energy and its mean power is energy / time. Dynamic energy counts
what each model already reports (the constants are the hardware file's `energy:` block, their
sources in the file):
- GPU, SimPy model: DRAM bytes x pJ/bit x 8 + L2 bytes x pJ/B + tensor FLOPs x pJ/FLOP + CUDA-core
  lane-ops x pJ/op, the FLOPs and lane-ops being the units' busy share of the kernel body at their
  peak rate (`util_tensor`, `util_cuda`: padded MMA work and dequantization included). Nothing of
  the GPU time model is touched: energy reads its output columns.
- NPU, SimPy model: DRAM bytes, SRAM bytes, MACs, decoded weights by stored width and vector ops of
  each launch, counted by the step model (mpsim/sim/npu/step.py, `npu_dynamic_j`).
- roofline (either kind): the analytic DRAM bytes, matrix FLOPs (gemm, attention) and other FLOPs.
A hardware file without an `energy:` block gives NaN energy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpsim.hw_models.schema import GpuEnergy, GpuSpec, HardwareSpec, NpuEnergy
from mpsim.sim.roofline import MATRIX_OPS

PJ = 1e-12


def static_w(hw: HardwareSpec) -> float:
    return hw.energy.static_W if hw.energy is not None else float("nan")


def gpu_components_j(per: pd.DataFrame, hw: GpuSpec) -> dict[str, np.ndarray]:
    """Dynamic energy of GPU SimPy launches by part (dram, l2, tensor, cuda), from their bytes and
    unit busy shares."""
    e = hw.energy
    if e is None:
        nan = np.full(len(per), np.nan)
        return {"dram": nan, "l2": nan, "tensor": nan, "cuda": nan}
    body = per["kernel_s"].to_numpy(dtype=float)
    tensor_flops = np.nan_to_num(per["util_tensor"].to_numpy(dtype=float)) * body \
        * hw.matrix_peak_flops("fp16")
    lanes = hw.compute_units * hw.cuda_core.fp32_flops_per_clock_per_SM / 2 * hw.clock_MHz * 1e6
    lane_ops = np.nan_to_num(per["util_cuda"].to_numpy(dtype=float)) * body * lanes
    return {
        "dram": per["bytes_dram"].to_numpy(dtype=float) * 8 * e.dram_pJ_per_bit * PJ,
        "l2": np.nan_to_num(per["bytes_l2"].to_numpy(dtype=float)) * e.l2_pJ_per_byte * PJ,
        "tensor": tensor_flops * e.tensor_pJ_per_flop * PJ,
        "cuda": lane_ops * e.cuda_pJ_per_op * PJ,
    }


def gpu_dynamic_j(per: pd.DataFrame, hw: GpuSpec) -> np.ndarray:
    """Dynamic energy of GPU SimPy launches (the sum of gpu_components_j)."""
    parts = gpu_components_j(per, hw)
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


def roofline_dynamic_j(rows: pd.DataFrame, hw: HardwareSpec) -> np.ndarray:
    """Dynamic energy of roofline launches: analytic bytes and FLOPs at the file's energies."""
    e = hw.energy
    if e is None:
        return np.full(len(rows), np.nan)
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    flops = rows["flops"].to_numpy(dtype=float)
    matrix = rows["op"].isin(MATRIX_OPS).to_numpy(dtype=bool)
    if isinstance(e, GpuEnergy):
        per_matrix, per_other = e.tensor_pJ_per_flop, e.cuda_pJ_per_op
    else:
        per_matrix, per_other = e.mac_pJ["fp16"] / 2, e.vector_pJ_per_op
    compute = np.where(matrix, flops * per_matrix, flops * per_other)
    return (nbytes * 8 * e.dram_pJ_per_bit + compute) * PJ


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


def launch_energy_j(per: pd.DataFrame, rows: pd.DataFrame, hw: HardwareSpec,
                    time_s: np.ndarray) -> np.ndarray:
    """energy_j of every launch: the model's dynamic energy plus static power over its time share."""
    if "energy_dyn_j" in per:  # the NPU step model and the roofline count their own
        dynamic = per["energy_dyn_j"].to_numpy(dtype=float)
    elif isinstance(hw, GpuSpec):
        dynamic = gpu_dynamic_j(per, hw)
    else:
        dynamic = np.full(len(per), np.nan)
    return dynamic + static_w(hw) * np.asarray(time_s, dtype=float)
