"""The compute units of one NPU core: the MAC array (matrix products) and the vector unit.

The MAC array does rows x cols fp16 MACs per cycle on a tile whatever its activation count (weights
map onto PEs and activations are broadcast, so a batch-1 GEMV still uses every PE), plus rows + cols
cycles to fill and drain per tile. The vector unit runs softmax, norms, activations, KV (de)quant.
"""

from __future__ import annotations

import simpy

from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.units import Proc, TokenPool


class MacArray:
    def __init__(self, env: simpy.Environment, r: NpuRates, core: int) -> None:
        self.r = r
        self.unit = TokenPool(env, f"mac{core}", 1)
        self.macs = 0.0

    def cycles(self, macs: float, products: float) -> float:
        """`products` matrix products of `macs` MACs in all, each paying fill and drain once."""
        return macs / self.r.macs_pc + products * self.r.mac_fill if macs > 0 else 0.0

    def run(self, macs: float, products: float) -> Proc:
        self.macs += macs
        yield from self.unit.hold(1, self.cycles(macs, products))


class VectorUnit:
    def __init__(self, env: simpy.Environment, r: NpuRates, core: int) -> None:
        self.r = r
        self.unit = TokenPool(env, f"vector{core}", 1)
        self.flops = 0.0

    def cycles(self, flops: float) -> float:
        return flops / self.r.vec_pc if flops > 0 else 0.0

    def run(self, flops: float) -> Proc:
        self.flops += flops
        yield from self.unit.hold(1, self.cycles(flops))
