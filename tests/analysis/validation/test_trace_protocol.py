"""`mpsim validate TRACE` and `mpsim plot --kind validation` price a captured trace the same way: under
the trace's measurement protocol (mpsim/sim/protocols.py). The plot once added the graph gap to a
`kernel` capture (4.25 vs 5.43 us mean per launch on the same trace)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.plots.inputs import trace_run
from mpsim.analysis.plots.validation import validation_frame
from mpsim.analysis.validation.trace_form import validate_trace
from mpsim.hw_models.loader import load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim.protocols import get_protocol
from mpsim.synth import synthesize
from mpsim.traces.trace import Trace
from mpsim.workload import Workload


def _captured(protocol: str | None) -> Trace:
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("fp16"), Workload(32, 3, 1))
    rng = np.random.default_rng(3)
    tr.rows["measured_us"] = pd.array(rng.uniform(2.0, 40.0, len(tr.rows)), dtype="Float64")
    return Trace(tr.rows, dataclasses.replace(tr.meta, protocol=protocol))


@pytest.mark.parametrize("protocol", ["kernel", "graph", "eager", "trt-profiler", None])
def test_validate_and_the_validation_plot_agree(protocol: str | None) -> None:
    hw = load_hardware("h200-sxm")
    trace = _captured(protocol)
    validated = validate_trace(trace, hw, cache_dir=None).frame
    plotted = validation_frame(trace_run(trace, hw, "sim"))
    ok = validated["status"] == "ok"
    np.testing.assert_allclose(plotted["predicted_s"].to_numpy() * 1e6,
                               validated.loc[ok, "predicted_us"].to_numpy(), rtol=1e-9, atol=0)
    np.testing.assert_allclose(plotted["measured_s"].to_numpy() * 1e6,
                               validated.loc[ok, "measured_us"].to_numpy(dtype=float), rtol=1e-12)


def test_a_kernel_capture_pays_no_graph_gap() -> None:
    hw = load_hardware("h200-sxm")
    kernel = validation_frame(trace_run(_captured("kernel"), hw, "sim"))["predicted_s"]
    graph = validation_frame(trace_run(_captured("graph"), hw, "sim"))["predicted_s"]
    gap = get_protocol("graph").per_launch_us * 1e-6
    np.testing.assert_allclose((graph - kernel).to_numpy(), gap, rtol=1e-6)
