"""The weight decoder of one NPU core: stored bit codes (bit-planes or groups) -> compute dtype.

Its rate (weights per cycle) depends on the stored bit width (hardware file
`weight_decoder.weights_per_cycle`); it streams into the MAC array, so decoding a tile overlaps
with multiplying it.
"""

from __future__ import annotations

import simpy

from mpsim.sim.npu.rates import NpuRates
from mpsim.sim.units import Proc, TokenPool


class WeightDecoder:
    def __init__(self, env: simpy.Environment, r: NpuRates, core: int) -> None:
        self.r = r
        self.unit = TokenPool(env, f"decoder{core}", 1)
        self.weights = 0.0

    def cycles(self, weights: float, bits: int) -> float:
        return weights / self.r.decode_rate(bits) if weights > 0 else 0.0

    def decode(self, weights: float, bits: int) -> Proc:
        self.weights += weights
        yield from self.unit.hold(1, self.cycles(weights, bits))
