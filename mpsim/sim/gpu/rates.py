"""A GPU hardware file turned into the per-cycle rates the CTA model uses (cycles at `clock_MHz`)."""

# ruff: noqa: N815  (names carry their units, as the hardware files do)

from __future__ import annotations

from dataclasses import dataclass

from mpsim.hw_models.schema import GpuSpec


@dataclass(frozen=True)
class GpuRates:
    clock_hz: float
    sms: int
    dram_Bpc: float          # achievable DRAM bytes per cycle, whole chip
    dram_peak_Bpc: float
    dram_latency: float      # cycles
    dram_channels: int
    l2_Bpc: float
    l2_latency: float
    l2_bytes: float
    port_Bpc: float          # one SM's share of L2 bandwidth: the most a lone SM can pull
    tensor_fpc: float        # dense fp16 tensor FLOP per cycle per SM (datasheet-consistent)
    fp32_lanes: float        # fp32 lane-ops per cycle per SM (an FMA is one lane-op)
    int_ops: float           # 32-bit integer ops per cycle per SM (dequantization)
    overhead_s: float
    smem_bytes: float        # per SM
    smem_per_cta_bytes: float
    registers: int           # per SM
    max_regs_per_thread: int
    max_warps: int
    max_ctas: int


def gpu_rates(hw: GpuSpec) -> GpuRates:
    clock = hw.clock_MHz * 1e6
    sms = hw.compute_units
    l2_bpc = hw.l2.bandwidth_GBps * 1e9 / clock
    return GpuRates(
        clock_hz=clock, sms=sms,
        dram_Bpc=hw.dram_bandwidth_Bps() * hw.achievable_bandwidth_fraction / clock,
        dram_peak_Bpc=hw.dram_bandwidth_Bps() / clock,
        dram_latency=hw.dram.latency_ns * 1e-9 * clock, dram_channels=hw.dram.channels,
        l2_Bpc=l2_bpc, l2_latency=hw.l2.latency_ns * 1e-9 * clock,
        l2_bytes=hw.l2.size_MiB * 2**20, port_Bpc=l2_bpc / sms,
        tensor_fpc=hw.matrix_flops_per_cycle("fp16"),
        fp32_lanes=hw.cuda_core.fp32_flops_per_clock_per_SM / 2,
        int_ops=hw.cuda_core.int32_ops_per_clock_per_SM,
        overhead_s=hw.launch_overhead_s(),
        smem_bytes=hw.sm.shared_memory_KiB * 1024,
        smem_per_cta_bytes=hw.sm.max_shared_memory_per_cta_KiB * 1024,
        registers=hw.sm.registers_32bit, max_regs_per_thread=hw.sm.max_registers_per_thread,
        max_warps=hw.sm.max_warps, max_ctas=hw.sm.max_ctas,
    )
