"""One launch on an NPU: per-core tile pipelines over shared DMA engines and DRAM.

Each core runs a double-buffered pipeline: a loader DMAs tile i+1 into the free SRAM half while the
core decodes and multiplies tile i (decoder and MAC array stream into each other, so they overlap;
attention's vector work follows its matrix products). After its last tile the core DMAs its outputs
out. Cores are identical units; all of them are simulated (at most a few), their tiles coarsened into
at most `max_iters` macro-tiles with the demand and DMA latency scaled to match (docs/simulator.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import simpy

from mpsim.hw_models.schema import NpuSpec
from mpsim.sim.npu.decoder import WeightDecoder
from mpsim.sim.npu.dma import DmaEngines
from mpsim.sim.npu.kernel_model import NpuTile, NpuWork, npu_work
from mpsim.sim.npu.mac import MacArray, VectorUnit
from mpsim.sim.npu.rates import NpuRates, npu_rates
from mpsim.sim.params import SimParams
from mpsim.sim.result import LaunchOutcome, pick_bound
from mpsim.sim.units import Proc

BUFFERS = 2  # double-buffered SRAM halves


class NpuLaunchSim:
    def __init__(self, r: NpuRates, p: SimParams) -> None:
        self.env = simpy.Environment()
        self.r, self.p = r, p
        self.dma = DmaEngines(self.env, r, p.dram_stripe_bytes)
        self.decoders = [WeightDecoder(self.env, r, c) for c in range(r.cores)]
        self.macs = [MacArray(self.env, r, c) for c in range(r.cores)]
        self.vectors = [VectorUnit(self.env, r, c) for c in range(r.cores)]

    def run(self, work: NpuWork) -> float:
        for core, tiles in enumerate(work.tiles_per_core):
            if tiles > 0:
                self.env.process(self._core(core, work.tile, tiles, work.write_bytes_per_core[core]))
        self.env.run()
        return float(self.env.now)

    def _core(self, core: int, tile: NpuTile, tiles: int, write_bytes: float) -> Proc:
        g = math.ceil(tiles / self.p.max_iters)
        n = math.ceil(tiles / g)
        scale = tiles / n
        free = simpy.Container(self.env, capacity=BUFFERS, init=BUFFERS)
        landed = [self.env.event() for _ in range(n)]
        self.env.process(self._loader(tile, scale, free, landed))
        for event in landed:
            yield event
            yield from self._compute(core, tile, scale)
            yield free.put(1)
        yield from self.dma.write(write_bytes)

    def _loader(self, tile: NpuTile, scale: float, free: simpy.Container,
                landed: list[simpy.Event]) -> Proc:
        for event in landed:
            yield free.get(1)
            self.env.process(self._load(tile, scale, event))

    def _load(self, tile: NpuTile, scale: float, landed: simpy.Event) -> Proc:
        yield from self.dma.read(tile.dma_bytes * scale, latency_scale=scale)
        landed.succeed()

    def _compute(self, core: int, t: NpuTile, scale: float) -> Proc:
        dec, mac, vec = self.decoders[core], self.macs[core], self.vectors[core]
        if t.serial or t.weights == 0:
            yield from mac.run(t.macs * scale, t.products * scale)
            yield from vec.run(t.vec_flops * scale)
            return
        yield self.env.all_of([self.env.process(dec.decode(t.weights * scale, t.bits)),
                               self.env.process(mac.run(t.macs * scale, t.products * scale))])
        yield from vec.run(t.vec_flops * scale)

    def busy(self, cycles: float) -> dict[str, float]:
        def most(units: list[Any]) -> float:
            return max(u.unit.busy_fraction(cycles) for u in units)
        return {"dram": self.dma.dram.busy_fraction(cycles),
                "dma": self.dma.engines.busy_fraction(cycles), "decoder": most(self.decoders),
                "mac": most(self.macs), "vector": most(self.vectors)}

    def utilization(self, cycles: float) -> dict[str, float]:
        r = self.r
        out = self.busy(cycles)
        out["dram"] = self.dma.dram.bytes / (r.dram_peak_Bpc * cycles) if cycles else 0.0
        out["sram"] = self.sram_bytes() / (r.sram_Bpc * r.cores * cycles) if cycles else 0.0
        return out

    def sram_bytes(self) -> float:
        """Bytes DMA'd into and out of SRAM plus the decoded weights the MAC array reads."""
        decoded = sum(d.weights for d in self.decoders) * 2
        return self.dma.bytes_in + self.dma.bytes_out + decoded


def simulate_npu_launch(row: Mapping[str, Any], hw: NpuSpec, p: SimParams,
                        resident: float = 0.0) -> LaunchOutcome:
    """Cycles, bytes per level, unit utilization and bound of one launch on an NPU.

    `resident` is accepted for symmetry with the GPU model; the NPU model streams every operand
    from DRAM (no cross-launch residency credit).
    """
    r = npu_rates(hw)
    sim = NpuLaunchSim(r, p)
    cycles = sim.run(npu_work(row, r, p))
    return LaunchOutcome(
        cycles=cycles, clock_hz=r.clock_hz, overhead_s=r.overhead_s, bytes_dram=sim.dma.dram.bytes,
        bytes_sram=sim.sram_bytes(), util=sim.utilization(cycles),
        bound=pick_bound(sim.busy(cycles), cycles / r.clock_hz, r.overhead_s))
