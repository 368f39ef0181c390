"""The typed shape of a hardware file: frozen dataclasses for a GPU and for an NPU.

The dataclass fields are the schema (validate.py walks them): gpu_spec.py (GpuSpec and its blocks),
npu_spec.py (NpuSpec and its blocks), base.py (Source, Block and what both specs share); this
module names the interface both offer (`HardwareSpec`) and re-exports them all. Every block that holds numbers
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
# ruff: noqa: N802

from __future__ import annotations

from typing import Literal, Protocol

from mpsim.hw_models.base import (
    DECODER_BITS,
    MATRIX_DTYPES,
    Block,
    Dram,
    Source,
    SourceKind,
    UnsupportedDtypeError,
)
from mpsim.hw_models.energy import GpuEnergy, NpuEnergy
from mpsim.hw_models.gpu_spec import (
    CudaCore,
    GpuCache,
    GpuCompute,
    GpuDram,
    GpuSpec,
    Launch,
    SmLimits,
    TensorCore,
)
from mpsim.hw_models.npu_spec import (
    Compiler,
    Dispatch,
    Dma,
    GemvPath,
    MacArray,
    NpuCompute,
    NpuSpec,
    NpuSram,
    SramBuffer,
    VectorUnit,
    WeightDecoder,
)

__all__ = [
    "DECODER_BITS",
    "MATRIX_DTYPES",
    "Block",
    "Compiler",
    "CudaCore",
    "Dispatch",
    "Dma",
    "Dram",
    "GemvPath",
    "GpuCache",
    "GpuCompute",
    "GpuDram",
    "GpuEnergy",
    "GpuSpec",
    "HardwareSpec",
    "Launch",
    "MacArray",
    "NpuCompute",
    "NpuEnergy",
    "NpuSpec",
    "NpuSram",
    "SmLimits",
    "Source",
    "SourceKind",
    "SramBuffer",
    "TensorCore",
    "UnsupportedDtypeError",
    "VectorUnit",
    "WeightDecoder",
]


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
