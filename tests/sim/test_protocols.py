"""Measurement protocols as data: the shipped file, its checks, and the simulator naming its protocol."""

from __future__ import annotations

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.sim import simulate
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.protocols import describe, get_protocol, parse_protocols, scope_launches, shipped
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
    assert plain.protocol is None and eager.protocol == "eager"
    # no protocol named: the graph protocol's per-kernel gap, from the protocol file
    assert hw.launch_overhead_s() is None
    graph = get_protocol("graph")
    assert plain.launches["overhead_s"].iloc[0] == pytest.approx(graph.per_launch_us * 1e-6)
    assert DEFAULT_PARAMS.launch_gap_us == graph.per_launch_us
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
