"""Validation: the performance models against measured times (docs/validation.md).

Two inputs, one output shape. A captured trace (trace_form.py: each launch measured) or a measured
table (`--against FILE`: aiconfigurator parquet, Vidur mlp.csv, the generic CSV; sources.py and
measured.py) becomes a per-row table (every input column, then predicted_us, roofline_us, error,
config, status) and a summary per op class and M band (metrics.py). adapter.py is the one place that
maps a measured row to the launches mpsim prices; predict.py runs them through `mpsim.sim.simulate`
and adds the protocol's fixed costs (mpsim/sim/protocols.py); calibration.py fits the named
constants; report.py regenerates docs/validation.md.
"""
