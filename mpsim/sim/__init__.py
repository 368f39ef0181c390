"""Performance models that replay traces: the roofline baseline and the SimPy simulators.

`simulate(trace, hw, model="sim")` (= `mpsim.sim.engine.simulate_trace`) is the entry point;
docs/simulator.md describes the models.
"""

from mpsim.sim.engine import simulate_trace

simulate = simulate_trace

__all__ = ["simulate", "simulate_trace"]
