"""Other frameworks' row-wise kernels (`vllm_rms_norm`, `vllm_rotary_embedding`,
`vllm_silu_and_mul`, `torch_add` rows) as CTA work.

vLLM's (and sarathi's) RMSNorm, rotary embedding and SiLU-and-mul launch one block per token of
T = min(width, 1024) threads (RoPE: min(query heads x head_dim / 2, 512)); a thread walks its row in
E = ceil(width / T) dependent iterations per pass (RMSNorm: two passes; RoPE: the query heads, then
the key heads), so a block is latency bound: E x `row_iter*_ns`. An SM overlaps `row_ctas_eff`
such blocks (less than it can hold: they share its load/store path), so the launch takes
max(1, tokens / (SMs x that)) rounds, each the longer of the block's latency and the round's bytes at
the achievable HBM bandwidth. PyTorch's add is a grid-stride vectorized stream: one iteration's round
trip, then its bytes at HBM bandwidth; its second input (the previous kernel's output) is read from
L2 when the row is `l2_warm` and it fits. Constants: SimParams row_* and add_iter_ns (Vidur rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mpsim.kernels.launch_config import TORCH_ADD, VLLM_RMS_NORM, VLLM_ROPE, VLLM_SILU_MUL, cdiv
from mpsim.sim.gpu.memory import usable_l2
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.sim.params import SimParams
from mpsim.traces.accounting import FP16

SM_THREADS = 2048
MAX_BLOCKS = 32


def _row_shape(row: Mapping[str, Any], p: SimParams) -> tuple[int, int, float, float]:
    """(threads, iterations per block, bytes per token, latency per iteration ns)."""
    kernel = str(row["kernel"])
    if kernel == VLLM_RMS_NORM:
        w = int(row["n"])
        t = min(w, 1024)
        return t, cdiv(w, t) * 2, 2 * w * FP16, p.row_iter_rms_ns
    if kernel == VLLM_SILU_MUL:
        w = int(row["n"])
        t = min(w, 1024)
        return t, cdiv(w, t), 3 * w * FP16, p.row_iter_ns
    if kernel == VLLM_ROPE:
        hq, hk, d = int(row["num_q_heads"]), int(row["num_kv_heads"]), int(row["head_dim"])
        t = min(hq * d // 2, 512)
        e = cdiv(hq * d // 2, t) + cdiv(hk * d // 2, t)
        return t, e, 2 * (hq + hk) * d * FP16, p.row_iter_rope_ns
    raise ValueError(f"not a framework row-wise kernel: {kernel!r}")


def framework_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    tokens = int(row["m"])
    if str(row["kernel"]) == TORCH_ADD:
        act = tokens * int(row["n"]) * FP16
        warm = bool(int(cfg.get("l2_warm", 0))) and act <= usable_l2(r, p)
        credit = act if warm else min(resident, act)
        count = r.sms
        trip = Trip((3 * act - credit) / count, 0.0, latency_ns=p.add_iter_ns)
        res = CtaResources(4, 0.0, 0.0, 1, 32)
        work = KernelWork(trip, Epilogue(0.0), (1,), "single", count, count, res, 3 * act - credit,
                          name="torch add")
        return [KernelPart(work, Occupancy(1, 1, False, "kernel"))]
    threads, iters, tok_bytes, t_iter = _row_shape(row, p)
    per_sm = min(MAX_BLOCKS, SM_THREADS // threads, p.row_ctas_eff)
    rounds = max(1.0, tokens / (r.sms * per_sm))
    count = min(tokens, r.sms)
    total = tokens * tok_bytes
    trip = Trip(total / (iters * count), 0.0, latency_ns=rounds * t_iter, overlap_latency=True)
    res = CtaResources(max(1, math.ceil(threads / 32)), 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(0.0), (iters,), "single", count, count, res, total,
                      name=str(row["kernel"]))
    return [KernelPart(work, Occupancy(1, 1, False, "kernel"))]
