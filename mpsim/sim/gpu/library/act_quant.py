"""Activation quantization before a W8A8 / A4 GEMM (`fp8_act_quant`, `fp8_block_act_quant`,
`nvfp4_act_quant` rows; names, configs and row builders: mpsim/library/act_quant.py) as CTA work.

Each kernel streams its input once: 16-bit activations in, fp8 / fp4 values and their scales out
(bytes: traces/accounting.py). A CTA walks its share of the values in dependent iterations of one
16-byte vector per thread: `fp8_act_quant` twice over its token's row (absmax, then convert: the
two-pass shape of vLLM's RMSNorm, whose per-iteration latency `vllm.row_iter_rms_ns` and CTA overlap
`vllm.row_ctas_eff`, fitted on Vidur's RMSNorm rows, it takes: an assumption, these kernels have
no measured rows of their own yet), the group and fp4 kernels once over their groups. The launch
takes max(1, CTAs / (SMs x overlap)) rounds, each the longer of that latency and its bytes at the
achievable HBM bandwidth, like vLLM's row-wise kernels (mpsim/sim/gpu/library/vllm.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.act_quant import (
    FP4_ELTS_PER_THREAD,
    FP8_ACT_QUANT,
    FP8_BLOCK_ACT_QUANT,
    GROUP,
    KERNELS,
    NVFP4_ACT_QUANT,
    THREADS_PER_GROUP,
)
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelWork, LaunchWork, Trip

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

VECTOR = 8  # 16-bit values per 16-byte vector load
SM_THREADS = 2048
MAX_BLOCKS = 32


def iterations(row: Mapping[str, Any], threads: int, ctas: int) -> int:
    """Dependent vector iterations one thread of a CTA makes."""
    kernel, m, n = str(row["kernel"]), int(row["m"]), int(row["n"])
    if kernel == FP8_ACT_QUANT:   # its token's row, twice (absmax, convert)
        return 2 * cdiv(n, threads * VECTOR)
    if kernel == FP8_BLOCK_ACT_QUANT:  # a 128-wide group over 16 threads, twice (absmax, convert)
        return 2 * cdiv(GROUP, THREADS_PER_GROUP * VECTOR)
    if kernel == NVFP4_ACT_QUANT:  # rows strided over the CTAs, 8 values a thread per row
        return cdiv(m, ctas) * cdiv(n, threads * FP4_ELTS_PER_THREAD)
    raise ValueError(f"not an activation-quantization kernel: {kernel!r}; expected one of {list(KERNELS)}")


def act_quant_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    threads = int(cfg["block_n"])
    ctas = max(1, math.prod(int(g) for g in grid))
    iters = iterations(row, threads, ctas)
    per_sm = min(MAX_BLOCKS, SM_THREADS // threads, p.vllm.row_ctas_eff)
    rounds = max(1.0, ctas / (r.sms * per_sm))
    count = min(ctas, r.sms)
    total = float(row["bytes_read"]) + float(row["bytes_written"])
    trip = Trip(total / (iters * count), 0.0, latency_ns=rounds * p.vllm.row_iter_rms_ns,
                overlap_latency=True)
    res = CtaResources(max(1, math.ceil(threads / 32)), 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(0.0), (iters,), "single", count, count, res, total,
                      name=str(row["kernel"]))
    return one_part(work)


WORK = dict.fromkeys(KERNELS, act_quant_work)
