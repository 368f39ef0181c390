"""mpsim's own Triton kernels (kernels/: `gemv_*_kernel`, `gemm_*_kernel`, `attention_decode_kernel`,
`attention_prefill_kernel`, `kv_quant_kernel` and the row-wise kernels; names and row builders:
mpsim/library/mpsim.py) as CTA work: the room's front.

They are priced from their own launch configs and, for the GEMM/GEMV family, their own SASS
instruction mix: by op, GEMM rows through mpsim_gemm.py, attention rows through mpsim_attention.py,
every other row (norms, RoPE, activations, residual add, embedding, argmax, KV writes) through
mpsim_rowwise.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mpsim.library.mpsim import KERNELS
from mpsim.sim.gpu.library.mpsim_attention import attention_work
from mpsim.sim.gpu.library.mpsim_fp import act_quant_work, fp_gemm_work
from mpsim.sim.gpu.library.mpsim_gemm import gemm_work
from mpsim.sim.gpu.library.mpsim_rowwise import rowwise_work
from mpsim.sim.gpu.occupancy import Occupancy
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import KernelPart, KernelWork, LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

    PartBuilder = Callable[[Mapping[str, Any], Mapping[str, int], list[int], GpuRates, SimParams,
                             float], tuple[KernelWork, Occupancy]]

BY_OP: dict[str, PartBuilder] = {"gemm": gemm_work, "attention": attention_work}
# the fp8 / fp4 kernels (issue 26, mpsim_fp.py): by kernel, before the op's builder
BY_KERNEL: dict[str, PartBuilder] = {
    **dict.fromkeys(("gemm_fp8_kernel", "gemm_fp8b_kernel", "gemv_fp4_kernel"), fp_gemm_work),
    "fp8_act_quant_kernel": act_quant_work}


@dataclass(frozen=True)
class MpsimParams:
    """mpsim's own Triton kernels: the attention kernels' costs that have no SASS table yet
    (estimates from kernel structure; CUDA-core work of the GEMM/GEMV family comes from the
    kernels' own SASS, mpsim/sim/gpu/sass_table.py); SimParams.mpsim (`--fit-params mpsim.NAME`).
    Where a value came from: mpsim/sim/params.py's docstring names the row sets."""

    softmax_ops_per_score: float = 8.0   # fp32 lane-ops: scale, max, subtract, exp2, sum
    kv_dequant_ops: float = 2.0          # per cached element: unpack + one FMA with scale/zero
    iter_overhead_cycles: float = 24.0   # per K trip: address arithmetic, barrier, loop control


def mpsim_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
               p: SimParams, resident: float) -> LaunchWork:
    """One launch of mpsim's kernels: one kernel, its work by op."""
    builder = BY_KERNEL.get(str(row["kernel"])) or BY_OP.get(str(row["op"]), rowwise_work)
    work, occ = builder(row, cfg, grid, r, p, resident)
    return [KernelPart(work, occ)]


WORK = dict.fromkeys(KERNELS, mpsim_work)
