"""Hardware description files (YAML, one per device) and their typed loader.

    from mpsim.hw_models import load_hardware, list_hardware
    hw = load_hardware("h200-sxm")          # or a path to a user's .yaml
    hw.dram_bandwidth_Bps(), hw.matrix_peak_flops("fp16"), hw.source_of("dram.bandwidth_GBps")

Imports nothing of mpsim beyond this package. Schema and sources: docs/hardware.md.
"""

from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.loader import list_hardware, load_hardware, parse_hardware
from mpsim.hw_models.schema import (
    GpuSpec,
    HardwareSpec,
    NpuSpec,
    Source,
    UnsupportedDtypeError,
)

__all__ = [
    "GpuSpec",
    "HardwareFileError",
    "HardwareSpec",
    "NpuSpec",
    "Source",
    "UnsupportedDtypeError",
    "list_hardware",
    "load_hardware",
    "parse_hardware",
]
