"""An NPU hardware file turned into per-cycle rates (cycles at the NPU's `clock_MHz`)."""

# ruff: noqa: N815  (names carry their units, as the hardware files do)

from __future__ import annotations

from dataclasses import dataclass

from mpsim.hw_models.schema import NpuSpec


@dataclass(frozen=True)
class NpuRates:
    clock_hz: float
    cores: int
    dram_Bpc: float            # achievable, whole chip
    dram_peak_Bpc: float
    dram_latency: float        # cycles
    dram_channels: int
    dma_engines: int
    dma_Bpc: float             # per engine
    dma_setup: float           # cycles per transfer descriptor
    wbuf_bytes: float          # weight SRAM per core (double-buffered: half per tile)
    abuf_bytes: float          # activation SRAM per core
    sram_Bpc: float            # weight + activation SRAM bandwidth per core
    macs_pc: float             # fp16 MACs per cycle per core
    mac_fill: float            # cycles to fill and drain the array per tile (rows + cols)
    vec_pc: float              # vector FLOP per cycle per core
    decoder: tuple[tuple[int, float], ...]  # (stored bits, weights per cycle per core), sorted
    overhead_s: float

    def decode_rate(self, bits: int) -> float:
        """Weights per cycle per core at `bits`: the listed width, else the next wider listed one."""
        for width, rate in self.decoder:
            if width >= bits:
                return rate
        listed = [w for w, _ in self.decoder]
        raise ValueError(f"weight decoder lists widths {listed}; none handles {bits}-bit weights")


def npu_rates(hw: NpuSpec) -> NpuRates:
    clock = hw.clock_MHz * 1e6
    m, s = hw.mac_array, hw.sram
    return NpuRates(
        clock_hz=clock, cores=hw.compute_units,
        dram_Bpc=hw.dram_bandwidth_Bps() * hw.achievable_bandwidth_fraction / clock,
        dram_peak_Bpc=hw.dram_bandwidth_Bps() / clock,
        dram_latency=hw.dram.latency_ns * 1e-9 * clock, dram_channels=hw.dram.channels,
        dma_engines=hw.dma.engines, dma_Bpc=hw.dma.bandwidth_GBps_per_engine * 1e9 / clock,
        dma_setup=hw.dma.setup_latency_ns * 1e-9 * clock,
        wbuf_bytes=s.weight_buffer.size_MiB * 2**20, abuf_bytes=s.activation_buffer.size_MiB * 2**20,
        sram_Bpc=(s.weight_buffer.bandwidth_GBps + s.activation_buffer.bandwidth_GBps) * 1e9 / clock,
        macs_pc=hw.matrix_flops_per_cycle("fp16") / 2, mac_fill=float(m.rows + m.cols),
        vec_pc=hw.vector.lanes * hw.vector.flops_per_lane_per_cycle,
        decoder=tuple(sorted((int(b), float(r)) for b, r in hw.weight_decoder.weights_per_cycle.items())),
        overhead_s=hw.launch_overhead_s(),
    )
