"""Fixed costs of the measurement protocols an iteration runs under, in one place.

A serving engine replays decode iterations as CUDA graphs (`graph`) and runs iterations with a
prefill (chunk) eagerly (`eager`). The numbers come from the protocol file (mpsim/sim/protocols.py,
mpsim/sim/protocols.yaml: `kernel`, `graph`, `eager`, `trt-profiler`, each with its sources), as
what a protocol adds beyond `mpsim.sim.simulate`'s own times: the simulator already charges every
GPU kernel the graph protocol's gap (SimParams.launch_gap_us), so a protocol adds per launch only
what it charges above that gap, and per iteration its per-call cost (an iteration is one
synchronized framework call: `eager` 32 us, the others 0). On a GPU then: decode iterations under
`graph` cost their simulated launches; iterations with a prefill under `eager` 32 us more. The
NPU's dispatch cost is in its hardware file, so on an NPU no protocol cost is added
(mpsim/serve/pricing.py). The per-iteration host overhead is 0 by default and settable
(`mpsim serve --host-overhead-us`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpsim.errors import MpsimInputError
from mpsim.sim.protocols import shipped
from mpsim.traces.schema import PROTOCOLS


def zeros() -> dict[str, float]:
    return dict.fromkeys(PROTOCOLS, 0.0)


def per_launch_beyond_simulator_s() -> dict[str, float]:
    """Each protocol's per-launch cost above the graph gap the simulator already charges."""
    table = shipped().protocols
    gap = table["graph"].per_launch_us
    return {name: max(0.0, table[name].per_launch_us - gap) * 1e-6 for name in PROTOCOLS}


def per_call_s() -> dict[str, float]:
    """Each protocol's cost per measured call (an iteration)."""
    return {name: p.per_call_us * 1e-6 for name, p in shipped().protocols.items()}


@dataclass(frozen=True)
class ProtocolCosts:
    decode: str = "graph"      # protocol of decode-only iterations
    prefill: str = "eager"     # protocol of iterations holding any prefill tokens
    per_launch_s: dict[str, float] = field(default_factory=per_launch_beyond_simulator_s)
    per_iteration_s: dict[str, float] = field(default_factory=per_call_s)
    host_overhead_s: float = 0.0  # scheduler/host time per iteration (not overlapped with the GPU)

    def __post_init__(self) -> None:
        for name in (self.decode, self.prefill):
            if name not in PROTOCOLS:
                raise MpsimInputError(f"protocol {name!r}: expected one of {', '.join(PROTOCOLS)}")
        if self.host_overhead_s < 0:
            raise MpsimInputError(f"host overhead must be >= 0, got {self.host_overhead_s}")

    def protocol(self, has_prefill: bool) -> str:
        return self.prefill if has_prefill else self.decode

    def cost_s(self, has_prefill: bool, launches: int) -> float:
        """What an iteration of `launches` launches pays on top of its simulated launches."""
        name = self.protocol(has_prefill)
        return (self.per_launch_s.get(name, 0.0) * launches + self.per_iteration_s.get(name, 0.0)
                + self.host_overhead_s)
