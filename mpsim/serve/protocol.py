"""Fixed costs of the measurement protocols an iteration runs under, in one place.

A serving engine replays decode iterations as CUDA graphs (`graph`) and runs iterations with a
prefill (chunk) eagerly (`eager`); the fidelity issue's protocol file (issue 11: `kernel`, `graph`,
`eager`, `trt-profiler`, each with its fixed costs) will supply the numbers below. Until it does
every cost is 0, so an iteration costs exactly what `mpsim.sim.simulate` gives its launches (launch
overhead included, from the hardware file), plus the per-iteration host overhead, also 0 by default
and settable (`mpsim serve --host-overhead-us`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpsim.errors import MpsimInputError

PROTOCOLS = ("kernel", "graph", "eager", "trt-profiler")


def _zeros() -> dict[str, float]:
    return dict.fromkeys(PROTOCOLS, 0.0)


@dataclass(frozen=True)
class ProtocolCosts:
    decode: str = "graph"      # protocol of decode-only iterations
    prefill: str = "eager"     # protocol of iterations holding any prefill tokens
    per_launch_s: dict[str, float] = field(default_factory=_zeros)     # added per launch
    per_iteration_s: dict[str, float] = field(default_factory=_zeros)  # added per iteration
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
