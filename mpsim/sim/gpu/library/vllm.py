"""vLLM's row-wise kernels (`vllm_rms_norm`, `vllm_rotary_embedding`, `vllm_silu_and_mul` rows) as
CTA work (names, configs and row builders: mpsim/library/vllm.py).

Rows: `vllm_rms_norm` (op norm, m tokens, n hidden), `vllm_silu_and_mul` (op act, n = output width,
k = 2n), `vllm_rotary_embedding` (op rope, n = (heads + kv_heads) x head_dim, k = head_dim, with
num_q_heads, num_kv_heads, head_dim).

vLLM's (and sarathi's) RMSNorm, rotary embedding and SiLU-and-mul launch one block per token of
T = min(width, 1024) threads (RoPE: min(query heads x head_dim / 2, 512)); a thread walks its row in
E = ceil(width / T) dependent iterations per pass (RMSNorm: two passes; RoPE: the query heads, then
the key heads), so a block is latency bound: E x `row_iter*_ns`. An SM overlaps `row_ctas_eff`
such blocks (less than it can hold: they share its load/store path), so the launch takes
max(1, tokens / (SMs x that)) rounds, each the longer of the block's latency and the round's bytes at
the achievable HBM bandwidth. Constants: VllmParams, SimParams.vllm (Vidur rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.vllm import KERNELS, VLLM_RMS_NORM, VLLM_ROPE, VLLM_SILU_MUL
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class VllmParams:
    """vLLM / sarathi row-wise kernels (Vidur rows); SimParams.vllm (`--fit-params vllm.NAME`).
    Where a value came from: mpsim/sim/params.py's docstring names the row sets."""

    row_iter_ns: float = 592.9           # SiLU-and-mul: one thread iteration (2 loads, a store)
    row_iter_rope_ns: float = 479.5      # RoPE: a q/k pair and cos/sin, 2 stores
    row_iter_rms_ns: float = 325.5       # RMSNorm: one element iteration over both passes
    row_ctas_eff: float = 1.429          # one-CTA-per-token kernels an SM effectively overlaps


SM_THREADS = 2048
MAX_BLOCKS = 32


def _row_shape(row: Mapping[str, Any], p: SimParams) -> tuple[int, int, float, float]:
    """(threads, iterations per block, bytes per token, latency per iteration ns)."""
    kernel = str(row["kernel"])
    if kernel == VLLM_RMS_NORM:
        w = int(row["n"])
        t = min(w, 1024)
        return t, cdiv(w, t) * 2, 2 * w * FP16, p.vllm.row_iter_rms_ns
    if kernel == VLLM_SILU_MUL:
        w = int(row["n"])
        t = min(w, 1024)
        return t, cdiv(w, t), 3 * w * FP16, p.vllm.row_iter_ns
    if kernel == VLLM_ROPE:
        hq, hk, d = int(row["num_q_heads"]), int(row["num_kv_heads"]), int(row["head_dim"])
        t = min(hq * d // 2, 512)
        e = cdiv(hq * d // 2, t) + cdiv(hk * d // 2, t)
        return t, e, 2 * (hq + hk) * d * FP16, p.vllm.row_iter_rope_ns
    raise ValueError(f"not a vLLM row-wise kernel: {kernel!r}; expected one of {list(KERNELS)}")


def vllm_rowwise_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                      p: SimParams, resident: float) -> LaunchWork:
    tokens = int(row["m"])
    threads, iters, tok_bytes, t_iter = _row_shape(row, p)
    per_sm = min(MAX_BLOCKS, SM_THREADS // threads, p.vllm.row_ctas_eff)
    rounds = max(1.0, tokens / (r.sms * per_sm))
    count = min(tokens, r.sms)
    total = tokens * tok_bytes
    trip = Trip(total / (iters * count), 0.0, latency_ns=rounds * t_iter, overlap_latency=True)
    res = CtaResources(max(1, math.ceil(threads / 32)), 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(0.0), (iters,), "single", count, count, res, total,
                      name=str(row["kernel"]))
    return one_part(work)


WORK = dict.fromkeys(KERNELS, vllm_rowwise_work)
