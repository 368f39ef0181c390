"""An NPU hardware file turned into per-cycle rates (cycles at the NPU's `clock_MHz`)."""

# ruff: noqa: N815  (names carry their units, as the hardware files do)

from __future__ import annotations

import math
from dataclasses import dataclass

from mpsim.hw_models.schema import NpuSpec

Table = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class NpuRates:
    clock_hz: float
    cores: int
    dram_Bpc: float            # achievable, whole chip
    dram_peak_Bpc: float
    dram_latency: float        # cycles
    dma_Bpc: float             # all engines together
    dma_setup: float           # cycles per transfer descriptor
    wbuf_bytes: float          # weight/KV SRAM per core (the DMA run-ahead window)
    abuf_bytes: float          # activation SRAM per core
    wbuf_Bpc: float            # per core
    abuf_Bpc: float            # per core
    rows: int                  # weight-stationary array: K side of a stationary tile
    cols: int                  # N side
    mac_rate: float            # fp16 MACs per PE per cycle
    load_cycles: float         # to load one stationary tile (overlaps the previous pass)
    min_pass: float            # the shortest pass of activations through a tile
    gemv_macs_pc: float        # dedicated matrix-vector path, fp16 MACs per cycle per core (0: none)
    gemv_rows: int
    vec_pc: float              # vector FLOP per cycle per core
    decoder: Table             # (stored bits, weights per cycle per core), uniform group codes
    anyprec: Table             # bit-plane + LUT decoder
    overhead_s: float          # dispatch
    fusion: bool

    @property
    def macs_pc(self) -> float:
        """fp16 MACs per cycle per core at the array's full rate."""
        return self.rows * self.cols * self.mac_rate

    def decode_rate(self, bits: int, fmt: str = "group") -> float:
        """Weights per cycle per core at `bits`: the listed width, else the next wider listed one."""
        table = self.anyprec if fmt == "anyprec" else self.decoder
        for width, rate in table:
            if width >= bits:
                return rate
        listed = [w for w, _ in table]
        raise ValueError(f"weight decoder lists widths {listed}; none handles {bits}-bit weights")

    def array_cycles(self, m: float, n: float, k: float) -> float:
        """Cycles for an (m x k) @ (k x n) product on one core's weight-stationary array.

        ceil(k/rows) x ceil(n/cols) stationary tiles; per tile a pass of the m activation rows
        (at least `min_pass` cycles) while the next tile loads behind it (`load_cycles`)."""
        if m <= 0 or n <= 0 or k <= 0:
            return 0.0
        tiles = math.ceil(k / self.rows) * math.ceil(n / self.cols)
        return tiles * max(m, self.min_pass, self.load_cycles) / self.mac_rate

    def gemv_cycles(self, m: float, n: float, k: float) -> float:
        """Cycles on the matrix-vector path, or inf when there is none or m exceeds its rows."""
        if self.gemv_macs_pc <= 0 or m > self.gemv_rows:
            return math.inf
        return m * n * k / self.gemv_macs_pc

    def matrix_cycles(self, m: float, n: float, k: float) -> tuple[float, bool]:
        """(cycles, on the array?) for the faster of the array and the GEMV path."""
        array, gemv = self.array_cycles(m, n, k), self.gemv_cycles(m, n, k)
        return (array, True) if array <= gemv else (gemv, False)


def npu_rates(hw: NpuSpec) -> NpuRates:
    clock = hw.clock_MHz * 1e6
    m, s = hw.mac_array, hw.sram
    decoder = tuple(sorted((int(b), float(r)) for b, r in hw.weight_decoder.weights_per_cycle.items()))
    anyprec_table = hw.weight_decoder.anyprec_weights_per_cycle
    anyprec = decoder if anyprec_table is None else tuple(
        sorted((int(b), float(r)) for b, r in anyprec_table.items()))
    return NpuRates(
        clock_hz=clock, cores=hw.compute_units,
        dram_Bpc=hw.dram_bandwidth_Bps() * hw.achievable_bandwidth_fraction / clock,
        dram_peak_Bpc=hw.dram_bandwidth_Bps() / clock,
        dram_latency=hw.dram.latency_ns * 1e-9 * clock,
        dma_Bpc=hw.dma.engines * hw.dma.bandwidth_GBps_per_engine * 1e9 / clock,
        dma_setup=hw.dma.setup_latency_ns * 1e-9 * clock,
        wbuf_bytes=s.weight_buffer.size_MiB * 2**20, abuf_bytes=s.activation_buffer.size_MiB * 2**20,
        wbuf_Bpc=s.weight_buffer.bandwidth_GBps * 1e9 / clock,
        abuf_Bpc=s.activation_buffer.bandwidth_GBps * 1e9 / clock,
        rows=m.rows, cols=m.cols, mac_rate=m.macs_per_pe_per_cycle["fp16"],
        load_cycles=m.stationary_load_cycles, min_pass=m.min_pass_cycles,
        gemv_macs_pc=hw.gemv.macs_per_cycle if hw.gemv else 0.0,
        gemv_rows=hw.gemv.max_rows if hw.gemv else 0,
        vec_pc=hw.vector.lanes * hw.vector.flops_per_lane_per_cycle,
        decoder=decoder, anyprec=anyprec, overhead_s=hw.launch_overhead_s(),
        fusion=bool(hw.compiler and hw.compiler.fusion),
    )
