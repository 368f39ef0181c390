"""DMA engines moving tiles between DRAM and on-chip SRAM.

A transfer pays the descriptor setup (latency: an engine fetches the next descriptor while it moves
data), takes one engine (FIFO over the chip's engines), streams through DRAM (shared channels,
achievable bandwidth) no faster than the engine's own rate, and frees the engine; a read's data
lands one DRAM latency later (writes are posted).
"""

from __future__ import annotations

import simpy

from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.units import Memory, Proc, TokenPool


class DmaEngines:
    def __init__(self, env: simpy.Environment, r: NpuRates, stripe_bytes: int) -> None:
        self.env, self.r = env, r
        self.dram = Memory(env, "dram", r.dram_Bpc, r.dram_latency, r.dram_channels, stripe_bytes)
        self.engines = TokenPool(env, "dma", r.dma_engines)
        self.bytes_in = 0.0
        self.bytes_out = 0.0

    def read(self, nbytes: float, latency_scale: float = 1.0) -> Proc:
        """DRAM -> SRAM; returns when the data is in SRAM."""
        if nbytes <= 0:
            return
        yield from self._move(nbytes)
        self.bytes_in += nbytes
        yield self.env.timeout(self.r.dram_latency * latency_scale)

    def write(self, nbytes: float) -> Proc:
        """SRAM -> DRAM (posted)."""
        if nbytes <= 0:
            return
        yield from self._move(nbytes)
        self.bytes_out += nbytes

    def _move(self, nbytes: float) -> Proc:
        # Descriptor setup is latency: engines fetch the next descriptor while moving data.
        yield self.env.timeout(self.r.dma_setup)
        yield self.engines.acquire(1)
        start = self.env.now
        yield from self.dram.transfer(nbytes)
        engine_time = nbytes / self.r.dma_Bpc
        yield self.env.timeout(max(0.0, engine_time - (self.env.now - start)))
        # Busy = the engine's own work (bytes at its rate), not time spent waiting on DRAM.
        yield self.engines.release(1, engine_time)
