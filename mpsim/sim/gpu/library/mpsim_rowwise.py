"""Row-wise launches (norms, RoPE, activations, residual add, embedding, argmax) and KV writes.

One program per row (per token and KV head for kv_quant) walks its row in BLOCK chunks with no
software pipeline (num_stages 1): load a chunk, compute, store. Bytes and FLOPs come from the trace's
analytic accounting, spread evenly over the CTAs; norms read their row again for each extra pass
(RMSNorm: sum of squares, then scale; LayerNorm: mean, variance, then scale), those re-reads hit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.sim.gpu.memory import residency_credit
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy, registers_per_thread
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

# fp8_act_quant_kernel (kernels/fp8_act_quant.py): an absmax pass, then the convert pass
PASSES = {"rms_norm_kernel": 2, "layer_norm_kernel": 3, "fp8_act_quant_kernel": 2}
REDUCTION_SCRATCH = 1024.0  # bytes of shared memory for a block reduction


def rowwise_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> tuple[KernelWork, Occupancy]:
    block = int(cfg.get("block_n") or 1)
    ctas = _programs(row, grid, block)
    width = _row_width(row) * int(row.get("m") or 1) // ctas if row["op"] != "kv_quant" else block
    iters = max(1, -(-width // block))
    passes = PASSES.get(str(row["kernel"]), 1)
    read, written = float(row["bytes_read"]), float(row["bytes_written"])
    trip = Trip(read * passes / (ctas * iters), 0.0,
                pipes={"fp32": float(row["flops"]) / (ctas * iters)}, serial=True,
                overhead_cycles=p.mpsim.iter_overhead_cycles)
    res = CtaResources(cfg["num_warps"], 0.0, REDUCTION_SCRATCH, 1,
                       registers_per_thread(block, 0, cfg["num_warps"] * 32, r.max_regs_per_thread))
    occ = occupancy(res, r)
    reads = read - residency_credit(resident, _input_bytes(row))
    return KernelWork(trip, Epilogue(written / ctas), (iters,), "single", ctas, ctas, res,
                      reads), occ


def _programs(row: Mapping[str, Any], grid: list[int], block: int) -> int:
    ctas = 1
    for g in grid:
        ctas *= int(g)
    if row["kernel"] == "rope_kernel" and ctas == int(row["m"]) and int(row["n"]) > block:
        # mpsim/launch_plan.py records RoPE with grid (tokens,) and n = all heads' width, while
        # kernels/rope.py launches one program per (token, head) row; follow the kernel.
        return ctas * -(-int(row["n"]) // block)
    return ctas


def _row_width(row: Mapping[str, Any]) -> int:
    if row["op"] == "kv_quant":
        return int(row["head_dim"])
    if row["op"] == "act" and row.get("k") is not None:
        return int(row["k"])
    return int(row["n"])


def _input_bytes(row: Mapping[str, Any]) -> float:
    """The activation this launch reads first (what its predecessor just wrote)."""
    if row["op"] == "kv_quant":
        return float(row["batch"] * row["q_len"] * row["num_kv_heads"] * row["head_dim"] * 2 * FP16)
    if row["op"] in ("embed", "sample"):
        return 0.0 if row["op"] == "embed" else float(row["bytes_read"])
    return float(int(row["m"]) * _row_width(row) * FP16)
