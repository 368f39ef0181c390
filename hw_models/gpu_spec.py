"""A GPU hardware file's typed shape: its blocks (SMs, tensor and CUDA cores, caches, DRAM, an
optional launch-overhead calibration) and `GpuSpec` (the interface of schema.HardwareSpec)."""

# Names carry their units (bandwidth_GBps, clock_MHz) docs/design.md#hardware-files: mixedCase is the point.
# ruff: noqa: N802, N815

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mpsim.hw_models.base import MATRIX_DTYPES, Block, Source, _Common, _matrix_rate
from mpsim.hw_models.energy import GpuEnergy, energy_lines


@dataclass(frozen=True, kw_only=True)
class GpuCompute(Block):
    sm_count: int
    boost_clock_MHz: float  # the clock a launch starts at; the power limit lowers it (simulator)
    base_clock_MHz: float | None = None  # the GPU model's power-limited clock needs it (sim/gpu/power.py)
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
class GpuCache(Block):
    """A GPU's L2. Only the size is a datasheet number; bandwidth and latency are optional
    per-device overrides (a calibration) of the simulator's device-independent constants."""

    size_MiB: float
    bandwidth_GBps: float | None = None
    latency_ns: float | None = None
    # the L2's partitions (whitepapers: A100 and GH100 split it in two, each caching for the SMs
    # wired to it; B200 has one per die; Ada's AD102 one): where a cyclic stream starts to miss
    # (mpsim/sim/gpu/memory.py replay_hits). None: as partitioned (misses from the usable share)
    partitions: int | None = field(default=None, metadata={"min": 1})


@dataclass(frozen=True, kw_only=True)
class GpuDram(Block):
    """A GPU's DRAM: datasheet type, size and peak bandwidth; the rest are optional overrides."""

    type: str
    size_GB: float
    bandwidth_GBps: float
    latency_ns: float | None = None
    # a register load's (LDG) round trip under a full wave, what an unpipelined loop waits each
    # trip (mpsim's one-row GEMV); default the simulator's load_latency_ns
    load_latency_ns: float | None = None
    channels: int | None = None
    achievable_bandwidth_fraction: float | None = field(default=None, metadata={"max": 1.0})


@dataclass(frozen=True, kw_only=True)
class Launch(Block):
    overhead_us: float



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
