"""TensorRT-LLM's CUTLASS fpA_intB GEMM (`trtllm_fpaintb_gemm` rows, M >= 5) as CTA work: the trtllm
room's second kernel (names and tactics: mpsim/library/trtllm_fpaintb.py).

Row: op gemm, w_format int4-group / int8-group, group_size = k (per-channel scales), fp16
activations; config one of the tactics (block_m = token tile, block_n = weight tile, block_k 64,
`sched`, `sm80` 1 for the pre-Hopper CUTLASS 2 kernels).

Hopper (fpA_intB_launcher_sm90.inl): the int4/int8 weights are the wgmma A operand: TMA brings them
to shared memory, the consumer warpgroups (one per 64 weight rows) load them to registers, convert
them (CUTLASS numeric_conversion.h: int4 -> fp16 by 1 shift + 4 lop3 + 2 hsub2 + 2 hfma2 per 8
weights, int8 by 2 prmt + 2 hsub2 per 4), multiply by the per-channel scale (one hmul2 per 2
weights) and issue a register-sourced wgmma against the activations in shared memory. Before Hopper
(Sm80/Sm89 arch tags): CUTLASS 2 multistage mma.sync kernels of four warps, every warp converting
its fragments, serial split-K; ASSUMPTION: the Hopper kernel's latency constants (no Ampere/Ada rows
were fitted). The latency constants (TrtllmParams fpaintb_*) are fitted on H200 rows
(docs/kernels-weight-only.md names them).

AWQ's pre-quant scale before it (`trtllm_awq_prescale` rows, op other, m tokens, n = K;
preQuantScaleKernel.cu): every thread loads one float4 of the scale and of each of its kProcessRows
rows, multiplies (hmul2) and stores: a streaming pass of M x K x 2 bytes in and out. Priced as
PyTorch's vectorized elementwise stream (mpsim/sim/gpu/library/torch.py): its bytes at HBM
bandwidth over the SMs, one round trip `torch.add_iter_ns` (fitted on Vidur's add rows) per
kProcessRows row group. ASSUMPTION: no TensorRT-LLM pre-scale rows are published, the add's
measured round trip stands for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.library.wo_tiled import Converter, WoLoop, wo_tiled_work
from mpsim.sim.gpu.memory import residency_credit
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelWork, LaunchWork, Trip
from mpsim.traces.accounting import FP16

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

FPAINTB = Converter(
    name="trtllm fpA_intB",
    alu_per_w4=5 / 8,      # 1 shift + 4 lop3 per 8 int4 (numeric_conversion.h, int4b_t -> half_t)
    fma_per_w4=8 / 16,     # 2 hsub2 + 2 hfma2 + 4 hmul2 (scale) per 8 weights, 2 weights a lane-op
    alu_per_w8=2 / 4,      # 2 prmt per 4 int8 (int8_t -> half_t magic-number path)
    fma_per_w8=4 / 8,      # 2 hsub2 + 2 hmul2 (scale) per 4 weights
    lds_per_word=1.0,      # one 32-bit shared-memory load per packed word (A fragment to registers)
)
FPAINTB_SM80 = replace(FPAINTB, name="trtllm fpA_intB sm80", convert_threads_per_64=0)


def fpaintb_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                 p: SimParams, resident: float) -> LaunchWork:
    t = p.trtllm
    if cfg.get("sm80"):
        loop = WoLoop(cpi=t.sm80_fpaintb_cpi, mma_wait_cycles=t.sm80_fpaintb_mma_wait_cycles,
                      mma_token_cycles=t.sm80_fpaintb_mma_token_cycles, tile_ns=t.sm80_fpaintb_tile_ns,
                      fixup_ns=t.fpaintb_fixup_ns, fixed_ns=t.sm80_fpaintb_fixed_ns)
        return wo_tiled_work(row, cfg, r, FPAINTB_SM80, loop, resident)
    loop = WoLoop(cpi=t.fpaintb_cpi, mma_wait_cycles=t.fpaintb_mma_wait_cycles,
                  mma_token_cycles=t.fpaintb_mma_token_cycles, tile_ns=t.fpaintb_tile_ns,
                  fixup_ns=t.fpaintb_fixup_ns, fixed_ns=t.fpaintb_fixed_ns)
    return wo_tiled_work(row, cfg, r, FPAINTB, loop, resident)


def prescale_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                  p: SimParams, resident: float) -> LaunchWork:
    tokens, width = int(row["m"]), int(row["n"])
    act = tokens * width * FP16
    moved = 2 * act + width * FP16 - residency_credit(resident, act)
    count = r.sms
    trip = Trip(moved / count, 0.0, latency_ns=p.torch.add_iter_ns)
    res = CtaResources(4, 0.0, 0.0, 1, 32)
    work = KernelWork(trip, Epilogue(0.0), (1,), "single", count, count, res, moved - act,
                      dram_write_bytes=float(act), name="trtllm awq prescale")
    return one_part(work)
