"""The typed shape of a hardware file: frozen dataclasses for a GPU and for an NPU.

The dataclass fields are the schema (validate.py walks them). Every block that holds numbers
derives from `Block`: it names the `source` id its numbers come from, and `key_sources` may
point single keys at another source (e.g. a DRAM latency from a microbenchmark paper inside a
block whose other numbers come from a datasheet).

Both spec classes offer the same small interface, which is all the roofline and the simulator
use besides the nested fields: `name`, `kind`, `clock_MHz`, `compute_units`,
`dram_bandwidth_Bps()`, `achievable_bandwidth_fraction`, `matrix_peak_flops(dtype)`,
`matrix_flops_per_cycle(dtype)`, `vector_peak_flops()`, `launch_overhead_s()`, `sources`,
`source_of(key)` and `describe()`.
"""

# Names carry their units (bandwidth_GBps, clock_MHz) docs/design.md#hardware-files: mixedCase is the point.
# ruff: noqa: N802, N815

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from mpsim.hw_models.base import (
    DECODER_BITS,
    MATRIX_DTYPES,
    Block,
    Source,
    SourceKind,
    UnsupportedDtypeError,
)
from mpsim.hw_models.energy import GpuEnergy, NpuEnergy, energy_lines

__all__ = ["DECODER_BITS", "MATRIX_DTYPES", "Block", "GpuEnergy", "NpuEnergy", "Source", "SourceKind",
           "UnsupportedDtypeError"]


# ---------------------------------------------------------------- GPU blocks
@dataclass(frozen=True, kw_only=True)
class GpuCompute(Block):
    sm_count: int
    boost_clock_MHz: float  # the clock a launch starts at; the power limit lowers it (simulator)
    base_clock_MHz: float | None = None  # optional (no model reads it)
    sustained_clock_MHz: float | None = None  # optional: a measured clock under load (reports only)


@dataclass(frozen=True, kw_only=True)
class SmLimits(Block):
    shared_memory_KiB: float  # per SM, the configurable maximum
    max_shared_memory_per_cta_KiB: float
    registers_32bit: int  # per SM
    max_registers_per_thread: int
    max_warps: int  # resident per SM
    max_ctas: int  # resident per SM
    max_threads_per_cta: int


@dataclass(frozen=True, kw_only=True)
class TensorCore(Block):
    dense_peak_TFLOPs: dict[str, float] = field(metadata={"keys": MATRIX_DTYPES})
    flops_per_clock_per_SM: dict[str, float] = field(metadata={"keys": MATRIX_DTYPES})
    datasheet_clock_MHz: float  # the clock the datasheet's peaks imply (see docs/hardware.md)


@dataclass(frozen=True, kw_only=True)
class CudaCore(Block):
    fp32_peak_TFLOPs: float
    fp16_peak_TFLOPs: float
    fp32_flops_per_clock_per_SM: float
    int32_ops_per_clock_per_SM: float  # integer ops for dequantization (shift/mask/add)


@dataclass(frozen=True, kw_only=True)
class Dram(Block):
    type: str
    size_GB: float
    bandwidth_GBps: float
    latency_ns: float
    channels: int  # independent channels (stacks x channels per stack for HBM)
    achievable_bandwidth_fraction: float = field(metadata={"max": 1.0})


@dataclass(frozen=True, kw_only=True)
class GpuCache(Block):
    """A GPU's L2. Only the size is a datasheet number; bandwidth and latency are optional
    per-device overrides (a calibration) of the simulator's device-independent constants."""

    size_MiB: float
    bandwidth_GBps: float | None = None
    latency_ns: float | None = None


@dataclass(frozen=True, kw_only=True)
class GpuDram(Block):
    """A GPU's DRAM: datasheet type, size and peak bandwidth; the rest are optional overrides."""

    type: str
    size_GB: float
    bandwidth_GBps: float
    latency_ns: float | None = None
    channels: int | None = None
    achievable_bandwidth_fraction: float | None = field(default=None, metadata={"max": 1.0})


@dataclass(frozen=True, kw_only=True)
class Launch(Block):
    overhead_us: float


def _sources_by_id(sources: tuple[Source, ...]) -> dict[str, Source]:
    return {s.id: s for s in sources}


def _matrix_rate(table: dict[str, float], dtype: str, device: str) -> float:
    if dtype not in table:
        supported = ", ".join(sorted(table))
        raise UnsupportedDtypeError(
            f"{device}: no matrix throughput for dtype {dtype!r}; supported: {supported}"
        )
    return table[dtype]


class _Common:
    """Methods both specs share; they read only the attributes named in HardwareSpec."""

    name: str
    sources: tuple[Source, ...]

    def source_of(self, key: str) -> Source:
        """The Source for a dotted key such as 'dram.bandwidth_GBps' or 'sram.weight_buffer.size_MiB'."""
        node: object = self
        block: Block | None = None
        parts = key.split(".")
        for part in parts[:-1]:
            node = getattr(node, part, None)
            if isinstance(node, Block):
                block = node
        leaf = parts[-1]
        inside = block is not None and id(node) == id(block) and hasattr(block, leaf)
        if block is None or not inside:
            raise KeyError(f"{self.name}: {key!r} is not a key inside a block with a source")
        source_id = block.key_sources.get(leaf, block.source)
        return _sources_by_id(self.sources)[source_id]


@dataclass(frozen=True, kw_only=True)
class GpuSpec(_Common):
    """An NVIDIA GPU: SMs, tensor and CUDA cores, L2, DRAM, launch cost."""

    name: str
    kind: Literal["gpu"]
    description: str
    sources: tuple[Source, ...]
    compute: GpuCompute
    sm: SmLimits
    tensor_core: TensorCore
    cuda_core: CudaCore
    l2: GpuCache
    dram: GpuDram
    launch: Launch | None = None  # optional per-kernel overhead override (a calibration)
    energy: GpuEnergy | None = None

    @property
    def clock_MHz(self) -> float:
        """The boost clock: where a launch's clock starts (the simulator's power model lowers it)."""
        return self.compute.boost_clock_MHz

    @property
    def compute_units(self) -> int:
        return self.compute.sm_count

    @property
    def achievable_bandwidth_fraction(self) -> float | None:
        """The file's override, or None: the simulator's device-independent constant applies."""
        return self.dram.achievable_bandwidth_fraction

    def dram_bandwidth_Bps(self) -> float:
        return self.dram.bandwidth_GBps * 1e9

    def matrix_peak_flops(self, dtype: str) -> float:
        """Dense tensor-core FLOP/s (int8: ops/s) as the datasheet states it."""
        return _matrix_rate(self.tensor_core.dense_peak_TFLOPs, dtype, self.name) * 1e12

    def matrix_flops_per_cycle(self, dtype: str) -> float:
        """Per SM per `clock_MHz` cycle, chosen so SMs x this x clock == matrix_peak_flops."""
        return self.matrix_peak_flops(dtype) / (self.compute_units * self.clock_MHz * 1e6)

    def vector_peak_flops(self) -> float:
        return self.cuda_core.fp32_peak_TFLOPs * 1e12

    def launch_overhead_s(self) -> float | None:
        """The file's per-kernel overhead override, or None (the simulator's constant applies)."""
        return None if self.launch is None else self.launch.overhead_us * 1e-6

    def describe(self) -> str:
        c, d, l2 = self.compute, self.dram, self.l2
        tc = ", ".join(f"{k} {v:g}" for k, v in sorted(self.tensor_core.dense_peak_TFLOPs.items()))
        overrides = [f"{k} {v:g}" for k, v in (
            ("L2 GB/s", l2.bandwidth_GBps), ("L2 ns", l2.latency_ns), ("DRAM ns", d.latency_ns),
            ("achievable", d.achievable_bandwidth_fraction),
            ("launch us", self.launch.overhead_us if self.launch else None)) if v is not None]
        return "\n".join([
            f"{self.name} (gpu): {self.description}",
            f"  SMs {c.sm_count}, boost clock {c.boost_clock_MHz:g} MHz"
            + (f" (base {c.base_clock_MHz:g})" if c.base_clock_MHz is not None else "")
            + f"; tensor peaks at {self.tensor_core.datasheet_clock_MHz:g} MHz",
            f"  tensor dense TFLOP/s: {tc}",
            f"  CUDA cores fp32 {self.cuda_core.fp32_peak_TFLOPs:g} TFLOP/s",
            f"  L2 {l2.size_MiB:g} MiB; {d.type} {d.size_GB:g} GB, {d.bandwidth_GBps:g} GB/s peak",
            *energy_lines(self.energy),
            "  per-device overrides of the simulator's constants: "
            + (", ".join(overrides) if overrides else "none (datasheet numbers only)"),
            "  sources: " + ", ".join(s.id for s in self.sources),
        ])


# ---------------------------------------------------------------- NPU blocks
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


class HardwareSpec(Protocol):
    """What the roofline and the simulator may rely on, for a GPU and an NPU alike."""

    name: str
    sources: tuple[Source, ...]

    @property
    def energy(self) -> GpuEnergy | NpuEnergy | None: ...
    @property
    def kind(self) -> Literal["gpu", "npu"]: ...
    @property
    def clock_MHz(self) -> float: ...
    @property
    def compute_units(self) -> int: ...
    @property
    def achievable_bandwidth_fraction(self) -> float | None: ...
    def dram_bandwidth_Bps(self) -> float: ...
    def matrix_peak_flops(self, dtype: str) -> float: ...
    def matrix_flops_per_cycle(self, dtype: str) -> float: ...
    def vector_peak_flops(self) -> float: ...
    def launch_overhead_s(self) -> float | None: ...
    def source_of(self, key: str) -> Source: ...
    def describe(self) -> str: ...
