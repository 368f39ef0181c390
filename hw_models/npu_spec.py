"""An NPU hardware file's typed shape: its blocks (cores, MAC array, GEMV path, vector unit, SRAM,
DMA, weight decoder, compiler, dispatch) and `NpuSpec` (the interface of schema.HardwareSpec)."""

# Names carry their units (bandwidth_GBps, clock_MHz) docs/design.md#hardware-files: mixedCase is the point.
# ruff: noqa: N802, N815

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mpsim.hw_models.base import DECODER_BITS, MATRIX_DTYPES, Block, Dram, Source, _Common, _matrix_rate
from mpsim.hw_models.energy import NpuEnergy, energy_lines


@dataclass(frozen=True, kw_only=True)
class NpuCompute(Block):
    cores: int
    clock_MHz: float


@dataclass(frozen=True, kw_only=True)
class MacArray(Block):
    """A weight-stationary systolic array per core: a rows x cols weight tile is loaded into the PEs,
    the activations stream through it (one row of M per pass cycle)."""

    rows: int  # per core (the K side of the stationary tile)
    cols: int  # (the N side)
    macs_per_pe_per_cycle: dict[str, float] = field(metadata={"keys": MATRIX_DTYPES})
    stationary_load_cycles: float  # to load one rows x cols weight tile (overlaps the previous pass)
    min_pass_cycles: float  # the shortest pass of activations through a loaded tile


@dataclass(frozen=True, kw_only=True)
class GemvPath(Block):
    """A dedicated matrix-vector unit per core (weights streamed, activations held)."""

    macs_per_cycle: float  # per core, fp16
    max_rows: int  # activation rows it takes (GEMV and small batches)


@dataclass(frozen=True, kw_only=True)
class VectorUnit(Block):
    lanes: int  # per core
    flops_per_lane_per_cycle: float


@dataclass(frozen=True, kw_only=True)
class SramBuffer(Block):
    size_MiB: float  # per core
    bandwidth_GBps: float  # per core


@dataclass(frozen=True, kw_only=True)
class NpuSram:
    weight_buffer: SramBuffer
    activation_buffer: SramBuffer


@dataclass(frozen=True, kw_only=True)
class Dma(Block):
    engines: int  # per chip
    bandwidth_GBps_per_engine: float
    setup_latency_ns: float


@dataclass(frozen=True, kw_only=True)
class WeightDecoder(Block):
    # per core: weights decoded (bits -> compute dtype) per cycle, by stored bit width: uniform
    # group codes (and fp16 pass-through at 16), and any-precision bit-planes + LUT (if different)
    weights_per_cycle: dict[int, float] = field(metadata={"keys": DECODER_BITS})
    anyprec_weights_per_cycle: dict[int, float] | None = field(
        default=None, metadata={"keys": DECODER_BITS})


@dataclass(frozen=True, kw_only=True)
class Compiler(Block):
    """What the NPU's graph compiler does to a step's operator sequence."""

    fusion: bool  # fold norm, RoPE, activation, residual into the neighbouring GEMM or attention


@dataclass(frozen=True, kw_only=True)
class Dispatch(Block):
    overhead_us: float


@dataclass(frozen=True, kw_only=True)
class NpuSpec(_Common):
    """An NPU: cores with a MAC array and a vector unit, SRAM buffers, DMA, DRAM, decoder."""

    name: str
    kind: Literal["npu"]
    description: str
    sources: tuple[Source, ...]
    compute: NpuCompute
    mac_array: MacArray
    vector: VectorUnit
    sram: NpuSram
    dma: Dma
    dram: Dram
    weight_decoder: WeightDecoder
    dispatch: Dispatch
    gemv: GemvPath | None = None
    compiler: Compiler | None = None
    energy: NpuEnergy | None = None

    @property
    def clock_MHz(self) -> float:
        return self.compute.clock_MHz

    @property
    def compute_units(self) -> int:
        return self.compute.cores

    @property
    def achievable_bandwidth_fraction(self) -> float:
        return self.dram.achievable_bandwidth_fraction

    def dram_bandwidth_Bps(self) -> float:
        return self.dram.bandwidth_GBps * 1e9

    def matrix_flops_per_cycle(self, dtype: str) -> float:
        """Per core per cycle: rows x cols PEs, one MAC = 2 FLOPs."""
        m = self.mac_array
        return m.rows * m.cols * _matrix_rate(m.macs_per_pe_per_cycle, dtype, self.name) * 2

    def matrix_peak_flops(self, dtype: str) -> float:
        per_cycle = self.matrix_flops_per_cycle(dtype)
        return per_cycle * self.compute_units * self.clock_MHz * 1e6

    def vector_peak_flops(self) -> float:
        v = self.vector
        return v.lanes * v.flops_per_lane_per_cycle * self.compute_units * self.clock_MHz * 1e6

    def launch_overhead_s(self) -> float:
        return self.dispatch.overhead_us * 1e-6

    def describe(self) -> str:
        c, m, d, w = self.compute, self.mac_array, self.dram, self.sram.weight_buffer
        dtypes = ", ".join(
            f"{k} {self.matrix_peak_flops(k) / 1e12:.3g}" for k in sorted(m.macs_per_pe_per_cycle)
        )
        bits = ", ".join(f"{b}b {r:g}" for b, r in sorted(self.weight_decoder.weights_per_cycle.items()))
        return "\n".join([
            f"{self.name} (npu): {self.description}",
            f"  {c.cores} cores at {c.clock_MHz:g} MHz, MAC array {m.rows}x{m.cols} per core",
            f"  matrix peak TFLOP/s (TOP/s for int): {dtypes}",
            f"  vector {self.vector_peak_flops() / 1e12:.3g} TFLOP/s; weight buffer "
            f"{w.size_MiB:g} MiB/core at {w.bandwidth_GBps:g} GB/s",
            f"  {d.type} {d.size_GB:g} GB, {d.bandwidth_GBps:g} GB/s peak "
            f"(x{d.achievable_bandwidth_fraction:g} achievable), {d.latency_ns:g} ns",
            f"  decoder weights/cycle/core: {bits}",
            *([f"  GEMV path {self.gemv.macs_per_cycle:g} MAC/cycle/core (M <= {self.gemv.max_rows})"]
              if self.gemv else []),
            f"  operator fusion: {'on' if self.compiler and self.compiler.fusion else 'off'}",
            *energy_lines(self.energy),
            f"  dispatch overhead {self.dispatch.overhead_us:g} us; sources: "
            + ", ".join(s.id for s in self.sources),
        ])
