"""Collective rows of a parallel plan (mpsim/parallel.py) on a hardware model: their time from the
cost model mpsim/sim/collectives.py on the hardware file's node (hw_models/nodes/<gpu>.yaml), and
their roofline bound.

A collective row is priced as the library in its `comm_library` column runs it on `tp` GPUs of the
node (send/recv: two GPUs): NCCL's choice of algorithm and protocol by message size, vLLM's or
TensorRT-LLM's custom all-reduce with their one-/two-shot and fall-back rules, as captured in a
CUDA graph (decode and prefill both: the engines replay graphs). It overlaps with nothing: the
launches run back to back (mpsim/sim/replay.py), and no shipped engine file overlaps its
all-reduce with compute. The whole time is the `comm` part of the launch (docs/simulator.md
#time-parts); there is no host launch cost on top (the measured loops the constants were fitted on
hide it: docs/collectives.md#the-data-and-the-protocol).

The roofline prices a collective at its plain bound (collectives.plain_bound: bus bytes over the
datasheet link bandwidth plus NCCL's LL hop latency per step). The simulators' bound (`resident`)
is the link time alone: (n-1)/n of the message must reach each rank (any algorithm, in-switch
reduction included), a send/recv's whole message crosses the link.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from mpsim.errors import MpsimInputError
from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.node import NodeSpec, list_nodes, load_node
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.sim.collectives import (
    HW_LAT_US,
    Cost,
    NodeFit,
    Op,
    custom_allreduce_time,
    nccl_time,
    plain_bound,
    sendrecv_time,
)
from mpsim.sim.result import LaunchOutcome
from mpsim.traces.schema import COLLECTIVE_OPS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

OP_OF: dict[str, Op] = {"allreduce": "all_reduce", "allgather": "all_gather",
                        "reducescatter": "reduce_scatter", "sendrecv": "send_recv"}
assert set(OP_OF) == set(COLLECTIVE_OPS)


@cache
def node_of(hw_name: str) -> NodeSpec:
    """The node file of the hardware `hw_name` (hw_models/nodes/<name>.yaml): one clear error when
    there is none."""
    try:
        return load_node(hw_name)
    except HardwareFileError:
        raise MpsimInputError(
            f"collectives on {hw_name}: no node file hw_models/nodes/{hw_name}.yaml says how its GPUs "
            f"talk to each other (shipped nodes: {', '.join(list_nodes())}); a parallel plan runs on "
            "one of those") from None


def node_fit(hw: HardwareSpec) -> NodeFit:
    """The collective constants of `hw`'s node: fitted (the node file's `collectives` block) or,
    without one, NCCL's own tuning model on the datasheet link (every scale 1: an assumption)."""
    if not isinstance(hw, GpuSpec):
        raise MpsimInputError(f"collectives on {hw.name}: parallel plans run on GPUs of a node "
                              f"(hw_models/nodes), not on a {hw.kind}")
    return _fit(hw.name, _arch(hw))


def _arch(hw: GpuSpec) -> str:
    from mpsim.engines import architecture  # the engine files' architecture names

    return architecture(hw)


@cache
def _fit(name: str, arch: str) -> NodeFit:
    node = node_of(name)
    c = node.collectives
    base: dict[str, Any] = {"link_gbps": node.link_gbps(), "topology": node.topology, "arch": arch,
                            "nvls": bool(node.nvlink and node.nvlink.nvls)}
    if c is None:
        return NodeFit(**base, nccl_efficiency=1.0)
    fitted = {k: v for k, v in c.__dict__.items() if k != "fitted_on"}
    return NodeFit(**base, **fitted)


def collective_cost(row: Mapping[str, Any], hw: HardwareSpec) -> Cost:
    """One collective row's cost on `hw`'s node; errors name the launch."""
    node = node_of(hw.name)
    fit = node_fit(hw)
    op, group, nbytes = str(row["op"]), int(row["tp"]), float(row["msg_bytes"])
    library = str(row["comm_library"])
    where = f"{op} of {int(nbytes)} bytes"
    if op == "sendrecv":
        return sendrecv_time(nbytes, fit)
    if group < 2:
        raise MpsimInputError(f"{where}: a collective on {group} GPU; expected a group of 2 or more")
    if group > node.gpus_per_node:
        raise MpsimInputError(f"{where}: a group of {group} GPUs; a {node.name} node holds "
                              f"{node.gpus_per_node} (collectives across nodes are not modelled)")
    if op == "allreduce" and library != "nccl":
        if node.collectives is None:
            raise MpsimInputError(f"{where}: {library} all-reduce on {node.name}: its node file has no "
                                  "fitted collective constants for the custom kernels; use an engine "
                                  "whose all-reduce is NCCL (mpsim, turbomind)")
        if library == "vllm_custom":
            return custom_allreduce_time(nbytes, group, fit, "vllm", graph=True)
        return custom_allreduce_time(nbytes, group, fit, "trtllm", graph=True, hidden=int(row["n"]))
    return nccl_time(OP_OF[op], nbytes, group, fit)


def collective_outcome(row: Mapping[str, Any], hw: HardwareSpec) -> LaunchOutcome:
    """A collective row as a simulated launch: its whole time the `comm` part."""
    assert isinstance(hw, GpuSpec)  # node_fit refuses anything else first
    cost = collective_cost(row, hw)
    clock = hw.clock_MHz * 1e6
    t = cost.time_us * 1e-6
    return LaunchOutcome(cycles=t * clock, clock_hz=clock, overhead_s=0.0,
                         bytes_dram=float(row["bytes_read"]) + float(row["bytes_written"]),
                         bound="comm", parts={"comm": t})


def link_seconds(rows: pd.DataFrame, hw: HardwareSpec, plain: bool) -> np.ndarray:
    """Per row, the link time of a collective row (0 elsewhere): its plain bound (`plain`: bus bytes
    over the link plus NCCL's LL hop latency per step) or the link time alone ((n-1)/n of the
    message per rank; a send/recv's whole message)."""
    import numpy as np

    out = np.zeros(len(rows))
    is_comm = rows["op"].isin(COLLECTIVE_OPS).to_numpy(dtype=bool, na_value=False)
    if not is_comm.any():
        return out
    node = node_of(hw.name)
    link = node.link_gbps() * 1e9  # bytes/s
    hop = HW_LAT_US["nvlink" if node.topology == "nvswitch" else "pcie"]["ring"]["LL"] * 1e-6
    at = np.flatnonzero(is_comm)
    op = np.asarray(rows["op"].iloc[at].astype(str))
    size = rows["msg_bytes"].iloc[at].to_numpy(dtype=float, na_value=0.0)
    p2p = op == "sendrecv"
    n = np.where(p2p, 2, rows["tp"].iloc[at].to_numpy(dtype=float, na_value=1.0))
    # collectives.plain_bound, vectorized: steps x hop + bus factor x bytes / link
    steps = np.where(op == "allreduce", 2 * (n - 1), np.where(p2p, 1, n - 1))
    bus = np.where(p2p, 1.0, steps / n)
    share = np.where(p2p, 1.0, (n - 1) / n)
    out[is_comm] = steps * hop + bus * size / link if plain else share * size / link
    return out


def link_seconds_row(row: Mapping[str, Any], hw: HardwareSpec, plain: bool) -> float:
    """`link_seconds` of one collective row, in plain Python (`mpsim op`)."""
    node = node_of(hw.name)
    op, size = str(row["op"]), float(row["msg_bytes"])
    n = 2 if op == "sendrecv" else int(row["tp"])
    link = node.link_gbps()
    if plain:
        hop = HW_LAT_US["nvlink" if node.topology == "nvswitch" else "pcie"]["ring"]["LL"]
        return plain_bound(OP_OF[op], size, n, link, hop) * 1e-6
    share = 1.0 if op == "sendrecv" else (n - 1) / n
    return share * size / (link * 1e9)
