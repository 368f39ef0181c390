"""The optional `energy:` block of a hardware file: per-access and per-operation energies, static
power and the power limit (docs/hardware.md#energy-keys, docs/npu.md#energy).
"""

# Names carry their units (tdp_W, dram_pJ_per_bit): mixedCase is the point.
# ruff: noqa: N815

from __future__ import annotations

from dataclasses import dataclass, field

from mpsim.hw_models.base import DECODER_BITS, MATRIX_DTYPES, Block


@dataclass(frozen=True, kw_only=True)
class GpuEnergy(Block):
    """Energy per access and per operation, static power and the power limit (docs/npu.md#energy)."""

    tdp_W: float  # board power limit: no run's average power may exceed it
    static_W: float  # drawn whenever the device runs a workload (leakage, clocks, idle HBM)
    dram_pJ_per_bit: float  # per bit moved between DRAM and the chip
    l2_pJ_per_byte: float  # per byte through L2
    tensor_pJ_per_flop: float  # dense fp16 tensor-core FLOP, operand delivery included
    cuda_pJ_per_op: float  # one CUDA-core lane operation (fp32 FMA or int32 op)


@dataclass(frozen=True, kw_only=True)
class NpuEnergy(Block):
    """Energy per access and per operation, static power and the power limit (docs/npu.md#energy)."""

    tdp_W: float
    static_W: float
    dram_pJ_per_bit: float
    sram_pJ_per_byte: float  # per byte written to or read from on-chip SRAM
    mac_pJ: dict[str, float] = field(metadata={"keys": MATRIX_DTYPES})  # per MAC, by dtype
    decoder_pJ_per_weight: dict[int, float] = field(metadata={"keys": DECODER_BITS})
    vector_pJ_per_op: float


def energy_lines(energy: GpuEnergy | NpuEnergy | None) -> list[str]:
    if energy is None:
        return ["  energy: not given (energy columns are NaN)"]
    return [f"  TDP {energy.tdp_W:g} W, static {energy.static_W:g} W, "
            f"DRAM {energy.dram_pJ_per_bit:g} pJ/bit"]
