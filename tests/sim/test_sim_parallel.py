"""Simulating a parallel plan's trace (issue 25, mpsim/sim/comm.py): collective rows priced by the
collective cost model on the hardware file's node, their time in the `comm` part, the roofline's plain
bound, and the send/recv of pipeline stages against a hand computation."""

from __future__ import annotations

import pytest

from mpsim.engines import EngineChoice
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.node import load_node
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.collectives import BASE_LAT_US, HW_LAT_US, custom_allreduce_time, nccl_time, plain_bound
from mpsim.sim.comm import node_fit
from mpsim.sim.result import PART_COLUMNS
from mpsim.synth import synthesize
from mpsim.workload import Workload

SMALL = PRESETS["mobilellama-1.4b"]
H100 = load_hardware("h100-sxm")
WL = Workload(32, 3, 2)


def _trace(tp: int = 2, pp: int = 1, engine: str = "mpsim"):  # type: ignore[no-untyped-def]
    choice = EngineChoice(engine, "hopper") if engine != "mpsim" else EngineChoice()
    return synthesize(SMALL, parse_policy("w4"), WL, tp=tp, pp=pp, engine=choice)


def test_tp_trace_simulates_with_collective_time_in_its_own_part() -> None:
    trace = _trace(2)
    res = simulate(trace, H100, "sim", cache_dir=None)
    table = res.launches
    rows = trace.rows.reset_index(drop=True)
    comm = rows["op"].isin(["allreduce", "allgather"]).to_numpy()
    assert comm.sum() == 3 * (2 * SMALL.num_layers + 2)  # per pass: 2 per layer, embedding, logits
    times = table["time_s"].to_numpy()
    assert (times[comm] > 0).all()
    assert (table["part_comm_s"].to_numpy()[comm] == times[comm]).all()
    assert (table["part_comm_s"].to_numpy()[~comm] == 0).all()
    total = table[list(PART_COLUMNS)].sum(axis=1).to_numpy()
    assert abs(total - times).max() <= 1e-12 * times.max()  # the parts add up to the time
    # every all-reduce: NCCL's choice on the node's fitted constants, by hand
    fit = node_fit(H100)
    first = int(next(i for i in range(len(rows)) if rows["op"][i] == "allreduce"))
    nbytes = WL.batch * WL.prompt_len * SMALL.hidden * 2
    assert rows["msg_bytes"][first] == nbytes
    assert times[first] == pytest.approx(nccl_time("all_reduce", nbytes, 2, fit).time_us * 1e-6, rel=1e-12)
    one = simulate(_trace(1), H100, "sim", cache_dir=None)
    assert res.summary.tpot_mean_s > 0 and one.summary.tpot_mean_s > 0


def test_engines_custom_allreduce_and_the_roofline_plain_bound() -> None:
    fit = node_fit(H100)
    nbytes = WL.batch * SMALL.hidden * 2  # a decode step's all-reduce
    for engine, lib in (("vllm", "vllm"), ("trtllm", "trtllm")):
        trace = _trace(2, engine=engine)
        rows = trace.rows.reset_index(drop=True)
        res = simulate(trace, H100, "sim", cache_dir=None)
        at = rows.index[(rows["op"] == "allreduce") & (rows["phase"] == "decode")][0]
        want = custom_allreduce_time(nbytes, 2, fit, lib, graph=True,  # type: ignore[arg-type]
                                     hidden=SMALL.hidden).time_us * 1e-6
        assert res.launches["time_s"][at] == pytest.approx(want, rel=1e-12)
    trace = _trace(4)
    rows = trace.rows.reset_index(drop=True)
    roof = simulate(trace, H100, "roofline", cache_dir=None).launches
    at = rows.index[(rows["op"] == "allreduce") & (rows["phase"] == "decode")][0]
    link = load_node("h100-sxm").link_gbps()
    want = plain_bound("all_reduce", nbytes, 4, link, HW_LAT_US["nvlink"]["ring"]["LL"]) * 1e-6
    assert roof["time_s"][at] == pytest.approx(want, rel=1e-12) and roof["bound"][at] == "comm"


def test_pp_send_recv_against_the_hand_computation() -> None:
    """No published send/recv data: the model's send is NCCL's ring Simple base latency and one hop
    (the node's fitted scales) plus the bytes at the two-GPU bus bandwidth; it is at least the bytes
    over the datasheet link (the bound), and close to it for a large message."""
    trace = _trace(1, pp=2)
    rows = trace.rows.reset_index(drop=True)
    sends = rows.index[rows["op"] == "sendrecv"]
    assert len(sends) == 3  # one per pass (prefill, two decode steps)
    res = simulate(trace, H100, "sim", cache_dir=None).launches
    c = load_node("h100-sxm").collectives
    assert c is not None
    nbytes = WL.batch * WL.prompt_len * SMALL.hidden * 2  # the prefill pass's activations
    assert rows["msg_bytes"][sends[0]] == nbytes
    latency_us = c.nccl_latency_scale * BASE_LAT_US["ring"]["Simple"] + c.nccl_hop_scale * 3.4
    bus_gbps = c.nccl_efficiency * 450 * (1 - c.group_penalty / 2)  # NVLink 4: 450 GB/s a direction
    hand = (latency_us + nbytes / (bus_gbps * 1e3)) * 1e-6
    assert res["time_s"][sends[0]] == pytest.approx(hand, rel=1e-12)
    assert res["time_s"][sends[0]] >= nbytes / 450e9  # the bytes/bandwidth bound
    assert res["t_lower_s"][sends[0]] == pytest.approx(nbytes / 450e9, rel=1e-12)


def test_collectives_need_a_node_and_fitted_custom_kernels() -> None:
    trace = _trace(2)
    with pytest.raises(MpsimInputError, match=r"no node file hw_models/nodes/rtx-4090.yaml"):
        simulate(trace, load_hardware("rtx-4090"), "sim", cache_dir=None)
    with pytest.raises(MpsimInputError, match=r"parallel plans run on GPUs of a node"):
        simulate(trace, load_hardware("npu-llm"), "sim", cache_dir=None)
    with pytest.raises(MpsimInputError, match=r"vllm_custom all-reduce on a100-sxm-80gb: its node file "
                                               r"has no fitted collective constants"):
        simulate(_trace(2, engine="vllm"), load_hardware("a100-sxm-80gb"), "sim", cache_dir=None)
    a100 = simulate(trace, load_hardware("a100-sxm-80gb"), "sim", cache_dir=None)  # NCCL's own model
    assert a100.summary.tpot_mean_s > 0
