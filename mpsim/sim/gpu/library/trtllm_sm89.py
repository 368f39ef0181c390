"""TensorRT-LLM's context FMHA on Ada (`trtllm_sm89_context_fmha`) as CTA work (names, tiles and
dispatch: mpsim/library/trtllm_sm89.py; the decode kernels are the trtllm room's, XQA's HMMA kernel
pricing an e4m3 cache's conversion there).

A call is the op as aiconfigurator timed it: the QKV-preprocessing kernel (trtllm_attention.prep_part,
as before the Hopper context FMHA; Q written in e4m3 for the FP8 FMHA), then fmha_v2's flash-attention
kernel: a 128-thread CTA (four warps of 16 query rows each) per (query tile, head, sequence) walks
the keys up to its diagonal (shifted by cached tokens) a step of `block_n` keys at a time: K and V
by cp.async (two buffers: loads overlap the MMAs), QK^T and PV as mma.sync (the fp8 rate for the
FP8 FMHA's qmma), every warp reading the step's K and V from shared memory, the online softmax on
the fp32 lanes. The grid is dealt in waves over the SMs' slots (the CTAs an SM holds by shared
memory and registers), so a slot's share is the larger of (all tile steps / slots) and the longest
CTA, plus a prologue per CTA it runs, as FA2's prefill (fa2.py). Constants: TrtllmParams `sm89_*`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.kernels.launch_config import cdiv
from mpsim.library.trtllm_sm89 import FMHA_WARPS, TILED_HEAD_CHUNK, TRTLLM_SM89_FMHA
from mpsim.sim.gpu.library.fa3 import prefill_kv_bytes
from mpsim.sim.gpu.library.trtllm_attention import context_shape, diagonal_steps, prep_part
from mpsim.sim.gpu.occupancy import CtaResources, Occupancy, occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.gpu.library.trtllm import TrtllmParams
    from mpsim.sim.params import SimParams

# registers a thread: not read (no sm_89 cubin resource table here); the 255 cap of FA2's forward
# kernels at 128 threads, an assumption (two CTAs an SM by registers)
FMHA_REGS = 255


def _fmha_eta(t: TrtllmParams, fp8: bool, rows: int, limited: bool) -> float:
    """The main loop's share of the mma.sync peak: the bf16 kernels', the FP8 FMHA's by build
    (128-row tiles; head_dim 256's limited fragments; the other 64-row tiles)."""
    if not fp8:
        return t.sm89_fmha_eta
    if rows == 128:
        return t.sm89_fmha_fp8_wide_eta
    return t.sm89_fmha_fp8_limited_eta if limited else t.sm89_fmha_fp8_eta


def sm89_fmha_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                   p: SimParams, resident: float) -> LaunchWork:
    t = p.trtllm
    b, q, kv, hq, hk, d, fp8, bm, bn = context_shape(row, cfg)
    # head_dim 256's builds: limited QK / V fragments (their MMA share) and no ldgsts (one stage)
    limited = bool(int(cfg.get("sync_loads", 0)))
    elem = 1 if fp8 else FP16
    held = min(d, TILED_HEAD_CHUNK) if int(cfg.get("tiled", 0)) else d   # smem holds this much head
    res = CtaResources(FMHA_WARPS, bn * held * 2 * elem, bm * held * elem, 1, FMHA_REGS)
    occ = occupancy(res, r)
    slots = r.sms * occ.ctas_per_sm
    pairs = diagonal_steps(b, q, kv, hq, bm, bn)
    ctas = cdiv(q, bm) * b * hq
    workers = min(ctas, slots)
    per_worker = max(math.ceil(pairs / slots), cdiv(kv, bn))
    trip = Trip(load_bytes=bn * d * 2 * elem, mma_flops=4.0 * bm * bn * d,
                pipes={"fp32": bm * bn * t.sm89_softmax_ops}, serial=True,
                mma_dtype="fp8" if fp8 else "fp16",
                mma_eta=_fmha_eta(t, bool(fp8), bm, limited),
                smem_bytes=FMHA_WARPS * bn * d * 2 * elem)
    io = elem * b * q * d * hq + prefill_kv_bytes(row, elem)   # re-reads of K/V hit in L2
    # the output in bf16 as the trace's accounting writes every attention row's (the roofline's floor);
    # the FP8 FMHA's sm_89 kernels at head_dim 128 write e4m3 (setup.py), a byte less an element
    out = FP16 * b * q * d * hq
    work = KernelWork(trip, Epilogue(out / workers), (per_worker,), "single", workers, workers, res,
                      io, setup_ns=math.ceil(ctas / workers) * t.sm89_fmha_tile_ns,
                      fixed_ns=t.sm89_fmha_scope_us * 1e3, name="trtllm sm89 context fmha")
    prep = prep_part(b, q, hq, hk, d, 8 if int(cfg.get("kv_fp8", 0)) else 16, bool(fp8), r, p)
    # two K/V buffers filled by cp.async overlap the MMAs; without ldgsts (SYNC_LOADS) they do not
    stages = 1 if limited else 2
    return [prep, KernelPart(work, Occupancy(occ.ctas_per_sm, stages, False, occ.limiter))]


WORK = {TRTLLM_SM89_FMHA: sm89_fmha_work}
