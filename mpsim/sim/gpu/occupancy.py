"""How many CTAs of a launch fit on one SM at once: shared memory, registers, warps, CTA slots.

A CTA's shared memory is its pipeline buffers (num_stages copies of the per-trip tiles) plus a fixed
part; registers are estimated from the accumulator and the tiles a thread holds. A config whose
buffers exceed the per-CTA limit on this device is run with fewer stages, as many as fit (a real
launch of it would fail to compile with OutOfResources; the trace's config was chosen for a
132-SM Hopper part); `Occupancy.stages_clamped` records it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mpsim.sim.gpu.rates import GpuRates

BASE_REGS = 32           # indices, pointers, loop state per thread
REG_ALLOC_WARP = 256     # registers are allocated per warp in units of 256


@dataclass(frozen=True)
class CtaResources:
    warps: int
    stage_bytes: float     # shared memory per pipeline stage
    fixed_smem: float      # shared memory outside the pipeline (scratch, Q tile, LUT)
    stages: int
    regs_per_thread: int


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int
    stages: int            # pipeline depth actually used
    stages_clamped: bool
    limiter: str           # what caps ctas_per_sm: smem, registers, warps or ctas


def registers_per_thread(acc_elems: float, tile_elems: float, threads: int, cap: int) -> int:
    """fp32 accumulator elements plus fp16 tile elements (two per register), per thread."""
    regs = BASE_REGS + acc_elems / threads + tile_elems / (2 * threads)
    return int(min(cap, math.ceil(regs)))


def occupancy(res: CtaResources, r: GpuRates) -> Occupancy:
    stages = res.stages
    while stages > 1 and res.fixed_smem + stages * res.stage_bytes > r.smem_per_cta_bytes:
        stages -= 1
    smem = res.fixed_smem + stages * res.stage_bytes
    if smem > r.smem_per_cta_bytes:
        raise ValueError(
            f"a CTA needs {smem / 1024:.0f} KiB of shared memory even with one stage; the device "
            f"allows {r.smem_per_cta_bytes / 1024:.0f} KiB per CTA")
    warp_regs = math.ceil(res.regs_per_thread * 32 / REG_ALLOC_WARP) * REG_ALLOC_WARP
    limits = {
        "ctas": r.max_ctas,
        "warps": r.max_warps // res.warps,
        "smem": int(r.smem_bytes // smem) if smem > 0 else r.max_ctas,
        "registers": r.registers // (warp_regs * res.warps),
    }
    limiter = min(limits, key=lambda k: (limits[k], k))
    if limits[limiter] < 1:
        raise ValueError(f"a CTA of {res.warps} warps does not fit on one SM ({limiter} limit)")
    return Occupancy(limits[limiter], stages, stages != res.stages, limiter)
