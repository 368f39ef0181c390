"""Validation: the performance models against measured times (docs/validation.md).

Two inputs, one output shape. A captured trace (trace_form.py: each launch measured) or a measured
table (`--against FILE`: aiconfigurator parquet, Vidur mlp.csv, the generic CSV; sources.py and
measured.py) becomes a per-row table (every input column, then predicted_us, roofline_us, error,
config, status) and a summary per op class and M band (metrics.py). adapter.py is the one place that
maps a measured row to the launches mpsim prices; predict.py runs them through `mpsim.sim.simulate`
and asks mpsim/sim/protocols.py for each row's protocol cost; validate_run.py runs `mpsim validate`.

Calibration lives here too: constants.py (the one settings type, `Constants`, its file and how it
applies), calibration.py (`calibrate --against`: the named constants), fit_params.py
(`--fit-params`: SimParams fields jointly), calibrate_trace.py and calibrated_file.py (`calibrate
TRACE`: a calibrated hardware file), search.py (the minimizers), calibrate_run.py (the command's
work). The scatter plot is analysis/plots/validation.py; report.py regenerates docs/validation.md.
"""
