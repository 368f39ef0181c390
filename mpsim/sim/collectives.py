"""Collective cost model: NCCL ring/tree/NVLS all-reduce, all-gather and reduce-scatter, the one-shot and
two-shot custom all-reduce of vLLM and TensorRT-LLM within a node, and the plain bound.

Pure Python (no SimPy): `nccl_time`, `custom_allreduce_time` and `plain_bound` return a Cost (µs, the
algorithm and protocol chosen, steps, bytes per step, achieved bus bandwidth). Sizes are the
collective's buffer in bytes as nccl-tests counts them (all-gather: the gathered output;
reduce-scatter: the input). docs/collectives.md has the derivations and the validation.

What comes from the libraries (cited by file and commit):
- NCCL src/graph/tuning.cc (NVIDIA/nccl @5067397c): base latencies per algorithm and protocol
  (ring LL/LL128/Simple 6.6/14/8.4 µs; tree 6.8/14/8.4; NVLS 0), per-step hardware latencies on
  NVLink (ring 0.6/1.9/3.4, tree 0.6/1.25/4.0, NVLS Simple 25) and PCIe (ring 1.0/2.5/5.7, tree
  1.0/1.9/4.0), the steps (all-reduce 2(n-1), all-gather/reduce-scatter n-1; tree all-reduce
  2(n-1) intra-node hops), the protocol bandwidth factors (ring LL x0.5, LL128 x0.92; tree Simple
  x0.92, LL x1/3.8, LL128 x7/9 in one node), the algBw ratio (ring and NVLS n/steps, tree 0.5), NVLS
  efficiency (Hopper 0.85, Blackwell 0.74; x2 for all-reduce) and the choice: the (algorithm,
  protocol) of least predicted time. LL128 runs on NVLink only.
- vLLM csrc/custom_all_reduce.cuh (REDUCE_CASE): 2 GPUs always one-shot ("1stage"); fully connected
  GPUs one-shot below 512 KiB (<= 4 GPUs) or 256 KiB (<= 8), else two-shot; no custom all-reduce on
  more than two PCIe GPUs. vllm/distributed/device_communicators/all_reduce_utils.py
  CUSTOM_ALL_REDUCE_MAX_SIZES: above sm90 {2: 64 MiB, 4: 32 MiB, 8: 256 KiB} / sm100 {2: 2, 4: 2,
  8: 1 MiB} the call falls through to NCCL (symmetric memory or PyNCCL).
- The vLLM and TensorRT-LLM lines were read in the code search index (several copies of
  custom_all_reduce.cuh, all_reduce_utils.py and allreduceFusionKernels.h agree); the vLLM snapshot
  was too large to fetch, so no commit is pinned for them. "No custom kernel on more than two PCIe
  GPUs" is vLLM's custom_all_reduce.py (it disables itself there).
- TensorRT-LLM (mpsim/sim/trtllm_allreduce.py, read in NVIDIA/TensorRT-LLM @005b299b): AUTO runs the
  one-shot or two-shot kernel (cpp/tensorrt_llm/kernels/communicationKernels, ar_fusion) or NCCL as
  its lookup table of measured winners says per architecture, group size, hidden size and token
  count, and NCCL for a message above its workspace (16 MB on two GPUs, 8 MB on more) or without
  NVLink peer access (the aiconfigurator collector turns the autotuner off so the table decides).
  The table holds measured winners of the two custom kernels, so a custom entry is priced as the
  faster of the one-shot and two-shot models (TRT-LLM's two-shot with its own fitted constants).

What is fitted (NodeFit, with the rows named in docs/collectives.md): the bus efficiency of NCCL's
Simple protocol relative to the datasheet link bandwidth (all-reduce apart), scales on NCCL's base and
per-hop latencies, a group factor (1 - c/n) on NVSwitch, the NVLS all-reduce bandwidth, the custom
kernels' fixed latency and bus efficiency, vLLM's extra cost per call, the host-launch floors of eager
calls, and for PCIe hosts the exponent k of the bus bandwidth's fall with group size,
bw(n) = bw(2) (2/n)^k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from mpsim.sim import trtllm_allreduce

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "send_recv"]
OPS: tuple[Op, ...] = ("all_reduce", "all_gather", "reduce_scatter")  # what nccl_time prices
BASE_LAT_US = {"ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
               "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4}, "nvls": {"Simple": 0.0}}
HW_LAT_US = {"nvlink": {"ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
                        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0}, "nvls": {"Simple": 25.0}},
             "pcie": {"ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
                      "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0}}}
PROTO_BW = {"ring": {"LL": 0.5, "LL128": 0.92, "Simple": 1.0},
            "tree": {"LL": 1 / 3.8, "LL128": 7 / 9, "Simple": 0.92}, "nvls": {"Simple": 1.0}}
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
VLLM_ONESHOT_MAX = {4: 512 * 1024, 8: 256 * 1024}  # bytes below which >2 GPUs run one-shot
VLLM_CUSTOM_MAX = {"hopper": {2: 64 << 20, 4: 32 << 20, 8: 256 << 10},
                   "blackwell": {2: 2 << 20, 4: 2 << 20, 8: 1 << 20}}
COLLECTOR_HIDDEN = 4096  # the collector's rows: [elements / 4096, 4096], or [1, elements] below
VLLM_SYMM_MEM_MAX = {"hopper": {2: 64 << 20, 4: 32 << 20, 8: 64 << 20},
                     "blackwell": {2: 8 << 20, 4: 32 << 20, 8: 128 << 20}}


@dataclass(frozen=True)
class NodeFit:
    """What a node's collectives reach (docs/collectives.md#fitted-constants)."""

    link_gbps: float  # datasheet, per direction (hw_models/nodes)
    topology: Literal["nvswitch", "pcie"]
    arch: Literal["ampere", "ada", "hopper", "blackwell"]
    nvls: bool
    nccl_efficiency: float  # NCCL Simple ring bus bandwidth / link_gbps, all-gather/reduce-scatter (fitted)
    nccl_allreduce_efficiency: float = 1.0  # the same for all-reduce (fitted)
    nccl_latency_scale: float = 1.0  # x NCCL's base latencies (fitted)
    nccl_hop_scale: float = 1.0  # x NCCL's per-hop latencies (fitted)
    custom_latency_us: float = 0.0  # fixed cost of a custom all-reduce call in a CUDA graph (fitted)
    custom_efficiency: float = 1.0  # custom kernels' bus bandwidth / link_gbps (fitted)
    vllm_extra_us: float = 0.0  # vLLM's custom call over TRT-LLM's, per call in a CUDA graph (fitted)
    trtllm_twoshot_efficiency: float = 0.0  # TRT-LLM's two-shot bus bandwidth / link_gbps; 0: custom's
    trtllm_twoshot_us: float = 0.0  # TRT-LLM's two-shot over its one-shot fixed cost, per peer (fitted)
    vllm_twoshot_us: float = 0.0  # vLLM's two-shot kernel: a cost per peer over its two barriers (fitted)
    eager_floor_us: float = 0.0  # host-launched custom-kernel call: never faster than this (fitted)
    eager_other_floor_us: float = 0.0  # the same when vLLM falls through to symmetric memory or NCCL
    pcie_exponent: float = 0.0  # PCIe hosts: bus bandwidth x (2/n)^k (fitted; 0 on NVSwitch)
    group_penalty: float = 0.0  # NVSwitch: ring/tree bus efficiency x (1 - c/n) (fitted)
    nvls_fraction: float = 0.0  # NVLS all-reduce algBw / link_gbps (fitted); 0: NCCL's own NVLS model


@dataclass(frozen=True)
class Cost:
    time_us: float
    algorithm: str
    protocol: str
    steps: int
    bytes_per_step: float
    bus_gbps: float  # achieved bus bandwidth (nccl-tests' busbw) of this prediction


def _steps(op: Op, n: int) -> int:
    if op == "send_recv":
        return 1
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def bus_factor(op: Op, n: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter,
    1 for a send/recv (every byte crosses the link once)."""
    return 1.0 if op == "send_recv" else _steps(op, n) / n


def _bus_gbps(fit: NodeFit, n: int, efficiency: float, group_factor: bool = True) -> float:
    """Bus bandwidth: efficiency x link, x (2/n)^k on PCIe, x (1 - c/n) for NCCL's ring and tree
    (the custom kernels fit better without it: their bandwidth does not grow with the group)."""
    scale = (2 / n) ** fit.pcie_exponent if fit.topology == "pcie" else 1.0
    return efficiency * fit.link_gbps * scale * ((1 - fit.group_penalty / n) if group_factor else 1.0)


def _nvls_algbw(fit: NodeFit, n: int, op: Op) -> float:
    """NVLS algorithm bandwidth: fitted, or tuning.cc's (bus x nvlsEfficiency x 2 for all-reduce)."""
    if fit.nvls_fraction and op == "all_reduce":
        return fit.nvls_fraction * fit.link_gbps
    efficiency = fit.nccl_allreduce_efficiency if op == "all_reduce" else fit.nccl_efficiency
    bus = efficiency * fit.link_gbps * NVLS_EFFICIENCY[fit.arch]
    return bus * (2.0 if op == "all_reduce" else (n - 1) / n) * n / _steps(op, n)


def _candidates(op: Op, n: int, fit: NodeFit) -> list[tuple[str, str]]:
    protos = ["LL", "LL128", "Simple"] if fit.topology == "nvswitch" else ["LL", "Simple"]
    out = [("ring", p) for p in protos]
    if op == "all_reduce":
        out += [("tree", p) for p in protos]
    if fit.nvls and n > 2:
        out.append(("nvls", "Simple"))
    return out


def _nccl_one(op: Op, nbytes: float, n: int, fit: NodeFit, algo: str, proto: str) -> Cost:
    hw = "nvlink" if fit.topology == "nvswitch" else "pcie"
    steps = _steps(op, n)
    hops = 1 if algo == "nvls" else steps
    latency = (fit.nccl_latency_scale * BASE_LAT_US[algo][proto]
               + fit.nccl_hop_scale * hops * HW_LAT_US[hw][algo][proto])
    efficiency = fit.nccl_allreduce_efficiency if op == "all_reduce" else fit.nccl_efficiency
    bus = _bus_gbps(fit, n, efficiency) * PROTO_BW[algo][proto]
    algbw = _nvls_algbw(fit, n, op) if algo == "nvls" else bus * (0.5 if algo == "tree" else n / steps)
    time = latency + nbytes / (algbw * 1e3)
    return Cost(time, algo, proto, steps, nbytes / n, bus_factor(op, n) * nbytes / (time * 1e3))


def nccl_time(op: Op, nbytes: float, n: int, fit: NodeFit) -> Cost:
    """NCCL's choice and its time: the (algorithm, protocol) of least predicted time, as tuning.cc picks."""
    if n < 2 or nbytes <= 0 or op not in OPS:
        raise ValueError(f"collective {op} of {nbytes} bytes on {n} GPUs: need n >= 2, bytes > 0 "
                         f"and an op of {OPS}")
    return min((_nccl_one(op, nbytes, n, fit, a, p) for a, p in _candidates(op, n, fit)),
               key=lambda c: c.time_us)


def _custom(nbytes: float, n: int, fit: NodeFit, shot: str, library: str = "vllm") -> Cost:
    """One-shot: every GPU reads the n-1 peers' whole buffers (n-1)S and reduces (one barrier).
    Two-shot: reduce-scatter then all-gather, (n-1)/n S read twice (two barriers and vLLM's cost per
    peer, vllm_twoshot_us; TRT-LLM's own kernel: its fixed cost over one-shot, per peer, and its
    bandwidth are its own, trtllm_twoshot_*)."""
    moved, barriers = ((n - 1) * nbytes, 1) if shot == "oneshot" else (2 * (n - 1) / n * nbytes, 2)
    efficiency, fixed = fit.custom_efficiency, fit.custom_latency_us * barriers
    if library == "trtllm" and shot == "twoshot":
        efficiency = fit.trtllm_twoshot_efficiency or fit.custom_efficiency
        fixed = fit.custom_latency_us + fit.trtllm_twoshot_us * (n - 1)
    elif shot == "twoshot":
        fixed += fit.vllm_twoshot_us * (n - 1)
    bw = _bus_gbps(fit, n, efficiency, group_factor=False)
    time = fixed + moved / (bw * 1e3)
    steps = 1 if shot == "oneshot" else 2
    bus = bus_factor("all_reduce", n) * nbytes / (time * 1e3)
    return Cost(time, shot, "custom", steps, moved / steps, bus)


def custom_allreduce_time(nbytes: float, n: int, fit: NodeFit, library: Literal["vllm", "trtllm"],
                          graph: bool = True, hidden: int | None = None) -> Cost:
    """The all-reduce a framework runs for `nbytes`, with the library's choice of kernel. TRT-LLM's
    choice needs the tensor's shape, [nbytes / (2 hidden), hidden] of 16-bit elements: `hidden`, or
    the collector's (`collector_shape`) when None."""
    if library == "trtllm":
        tokens, width = collector_shape(nbytes) if hidden is None else (max(1, int(nbytes // (2 * hidden))),
                                                                        hidden)
        choice = trtllm_allreduce.strategy(tokens, width, n, nbytes, blackwell=fit.arch == "blackwell",
                                           nvlink=fit.topology == "nvswitch")
        # the two-shot kernel needs a token row per rank (allreduceOp.cpp: seq_len >= tp_size)
        shots = ("oneshot", "twoshot") if tokens >= n else ("oneshot",)
        cost = (nccl_time("all_reduce", nbytes, n, fit) if choice == "nccl"
                else min((_custom(nbytes, n, fit, shot, "trtllm") for shot in shots),
                         key=lambda c: c.time_us))
    else:
        cost = _vllm(nbytes, n, fit)
        cost = replace(cost, time_us=cost.time_us + fit.vllm_extra_us)
    floor = fit.eager_floor_us if cost.protocol == "custom" else fit.eager_other_floor_us
    if not graph and cost.time_us < floor:
        return replace(cost, time_us=floor, bus_gbps=bus_factor("all_reduce", n) * nbytes / (floor * 1e3))
    return cost


def collector_shape(nbytes: float) -> tuple[int, int]:
    """(tokens, hidden) of aiconfigurator's all-reduce rows (collect_all_reduce.py
    get_input_shape_and_comm_size): [1, elements] up to 4096 elements, else [elements / 4096, 4096]."""
    elements = int(nbytes // 2)
    if elements <= COLLECTOR_HIDDEN:
        return 1, max(1, elements)
    return elements // COLLECTOR_HIDDEN, COLLECTOR_HIDDEN


def _vllm(nbytes: float, n: int, fit: NodeFit) -> Cost:
    if fit.topology == "pcie" and n > 2:
        return nccl_time("all_reduce", nbytes, n, fit)  # "not supported on more than two PCIe-only GPUs"
    limits = VLLM_CUSTOM_MAX.get(fit.arch)
    if limits is not None and nbytes >= limits.get(n, math.inf):
        if fit.nvls and nbytes < VLLM_SYMM_MEM_MAX[fit.arch].get(n, 0):
            return _symm_mem(nbytes, n, fit)
        return nccl_time("all_reduce", nbytes, n, fit)
    oneshot = n == 2 or nbytes < VLLM_ONESHOT_MAX.get(n, VLLM_ONESHOT_MAX[8])
    return _custom(nbytes, n, fit, "oneshot" if oneshot else "twoshot")


def _symm_mem(nbytes: float, n: int, fit: NodeFit) -> Cost:
    """torch symmetric-memory all-reduce (multimem, in-switch reduction): two barriers of the custom
    kernels and NVLS bandwidth (NCCL's NVLS model with the node's all-reduce efficiency)."""
    time = 2 * fit.custom_latency_us + nbytes / (_nvls_algbw(fit, n, "all_reduce") * 1e3)
    bus_achieved = bus_factor("all_reduce", n) * nbytes / (time * 1e3)
    return Cost(time, "symm_mem", "Simple", 2, nbytes / n, bus_achieved)


def plain_bound(op: Op, nbytes: float, n: int, link_gbps: float, hop_latency_us: float) -> float:
    """Bytes over the link bandwidth plus a latency per hop: busbw = link peak, steps hops (µs)."""
    return _steps(op, n) * hop_latency_us + bus_factor(op, n) * nbytes / (link_gbps * 1e3)


def sendrecv_time(nbytes: float, fit: NodeFit) -> Cost:
    """NCCL send/recv of `nbytes` between two GPUs of the node (a pipeline stage's activations).
    An assumption, not validated (no published send/recv measurement here: docs/parallelism.md):
    one step of NCCL's ring Simple protocol, its base latency and one hop (NCCL's constants, the
    node's fitted scales), the bytes at the node's two-GPU all-gather bus bandwidth (a ring
    all-gather's steps are the same peer-to-peer copies)."""
    if nbytes <= 0:
        raise ValueError(f"send/recv of {nbytes} bytes: need bytes > 0")
    hw = "nvlink" if fit.topology == "nvswitch" else "pcie"
    latency = (fit.nccl_latency_scale * BASE_LAT_US["ring"]["Simple"]
               + fit.nccl_hop_scale * HW_LAT_US[hw]["ring"]["Simple"])
    time = latency + nbytes / (_bus_gbps(fit, 2, fit.nccl_efficiency) * 1e3)
    return Cost(time, "p2p", "Simple", 1, nbytes, nbytes / (time * 1e3))
