"""Measurement protocols as data: the shipped file, its checks, and the simulator naming its protocol."""

from __future__ import annotations

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.sim import simulate
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.protocols import (
    call_costs_us,
    describe,
    get_protocol,
    parse_protocols,
    scope_launches,
    shipped,
)
from mpsim.traces.schema import PROTOCOLS
from mpsim.traces.trace import rows_to_frame


def test_shipped_file_has_the_four_protocols_with_sources() -> None:
    table = shipped()
    assert sorted(table.protocols) == sorted(PROTOCOLS)
    for p in table.protocols.values():
        assert p.source in table.sources and table.sources[p.source]["citation"]
    assert get_protocol("eager").per_call_us >= 10  # host dispatch: tens of microseconds, cited
    assert get_protocol("kernel").cost_s(3) == 0.0
    assert scope_launches("rope+kv_append") == ("rope", "kv_append") and scope_launches("") == ()


def test_bad_protocol_files_and_names() -> None:
    text = ("sources: [{id: s, citation: x}]\nprotocols:\n  kernel: "
            "{description: d, per_call_us: 0, per_launch_us: 0, source: s}\nscopes: {'': []}\n")
    with pytest.raises(MpsimInputError, match="expected exactly"):
        parse_protocols(text, "p.yaml")
    with pytest.raises(MpsimInputError, match="unknown measurement protocol 'cupti'"):
        get_protocol("cupti")
    with pytest.raises(MpsimInputError, match="unknown op scope"):
        scope_launches("rope")


def test_simulate_says_which_protocol_it_predicts() -> None:
    hw = load_hardware("h200-sxm")
    rows = rows_to_frame([gemm_row(1, 4096, 4096)])
    plain = simulate(rows, hw, cache_dir=None)
    eager = simulate(rows, hw, cache_dir=None, protocol="eager")
    assert plain.protocol == "graph" and eager.protocol == "eager"
    # no protocol named: the graph protocol's per-kernel gap, from the protocol file
    assert hw.launch_overhead_s() is None
    graph = get_protocol("graph")
    assert plain.launches["overhead_s"].iloc[0] == pytest.approx(graph.per_launch_us * 1e-6)
    assert not hasattr(DEFAULT_PARAMS, "launch_gap_us")  # the protocol file owns the number
    assert eager.launches["overhead_s"].iloc[0] == pytest.approx(get_protocol("eager").cost_s(1))
    assert eager.launches["kernel_s"].iloc[0] == plain.launches["kernel_s"].iloc[0]
    assert "launch.overhead_us = 3 us" in describe(None, 3.0) and "eager" in describe("eager")
    assert "graph by default" in describe(None)


def test_a_protocol_pays_per_kernel_of_a_row() -> None:
    """An FA3 row with its KV append is two kernels: twice the per-launch cost."""
    hw = load_hardware("h200-sxm")
    rows = rows_to_frame([attention_row(4, 1, 512, 32, 8, 128, kernel="fa3", kv_append=True)])
    res = simulate(rows, hw, cache_dir=None, protocol="trt-profiler")
    assert res.launches["overhead_s"].iloc[0] == pytest.approx(
        2 * get_protocol("trt-profiler").per_launch_us * 1e-6)


def test_the_roofline_and_the_npu_pay_no_protocol_cost() -> None:
    rows = rows_to_frame([gemm_row(1, 4096, 4096)])
    roof = simulate(rows, load_hardware("h200-sxm"), "roofline", cache_dir=None, protocol="eager")
    assert roof.protocol is None and roof.launches["overhead_s"].iloc[0] == 0.0
    npu = simulate(rows, load_hardware("npu-llm"), cache_dir=None, protocol="eager")
    assert npu.protocol is None
    with pytest.raises(MpsimInputError, match="unknown measurement protocol"):
        simulate(rows, load_hardware("npu-llm"), cache_dir=None, protocol="cupti")


def test_a_calibrated_launch_overhead_is_the_devices_graph_gap() -> None:
    import dataclasses

    from mpsim.hw_models.schema import Launch

    hw = load_hardware("h200-sxm")
    tuned = dataclasses.replace(hw, launch=Launch(source=hw.dram.source, overhead_us=3.0))
    rows = rows_to_frame([gemm_row(1, 4096, 4096)])
    graph = simulate(rows, tuned, cache_dir=None).launches
    kernel = simulate(rows, tuned, cache_dir=None, protocol="kernel").launches
    assert graph["overhead_s"].iloc[0] == pytest.approx(3e-6)
    assert kernel["overhead_s"].iloc[0] == 0.0
    assert kernel["kernel_s"].iloc[0] == graph["kernel_s"].iloc[0]


def test_call_costs_are_the_protocols_own() -> None:
    import numpy as np
    import pandas as pd

    names = pd.Series(["graph", "eager", None, "trt-profiler"])
    got = call_costs_us(names, np.array([3, 2, 1, 2]))
    want = [get_protocol("graph").cost_us(3), get_protocol("eager").cost_us(2), np.nan,
            get_protocol("trt-profiler").cost_us(2)]
    np.testing.assert_array_equal(got, want)
