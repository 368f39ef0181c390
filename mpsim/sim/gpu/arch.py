"""Which GPU generation a hardware file describes, and what the GPU model runs on it.

The generation is read from the file's dense fp16 tensor rate per SM per clock, an architecture fact
from the whitepapers: Ampere and Ada issue mma.sync at 512-2048 FLOP/clk/SM (A100 2048, L40S 1024,
RTX 4090 512). Hopper's wgmma issues 4096 (H100 whitepaper). Blackwell's tcgen05 issues 8192
(b200-sxm.yaml, a labelled assumption). Consumer Blackwell (sm_120) has no tcgen05 and falls in
the Ampere class. That is the right family for it too, because it runs mma.sync.

The one place the model branches on the generation is the candidate tiles of mpsim's own Triton GEMM
kernels (kernels/launch_config.py: "hopper" or "ampere"). `CANDIDATE_FAMILY` maps every generation to
its candidate set. **Blackwell runs Hopper's set.** That is an explicit assumption until issue 24/23
give it tcgen05 tiles with 2-CTA MMA. cuBLAS runs per generation (mpsim/library/cublas.py: Ampere/Ada
mma.sync tiles with split-K, Hopper wgmma with stream-K, Blackwell tcgen05 with CTA pairs; issue 24).
The SASS instruction mix of mpsim's own kernels (mpsim/sim/gpu/sass_table.py, scripts/sass_mix.py)
is counted for two architectures, and `SASS_ARCH` picks the rows per generation: Ampere-class devices
(A100 sm_80; Ada sm_89, L40S and RTX 4090, which run sm_80-class code: mma.sync, no wgmma or TMA,
and the same CUDA-core pipes; consumer Blackwell sm_120, in this class by its tensor rate) are priced
from the sm_80 rows; Hopper from the sm_90a rows; **Blackwell (sm_100) from the sm_90a rows**, an
assumption: Triton's sm_100 code for these GEMV loops is CUDA-core code like sm_90a's, and no sm_100
compile is counted yet. Each device's own fp32/integer issue rates come from its hardware file.
Everything else in the GPU model is Hopper's on every GPU today: the FA3 and TRT-LLM kernels. Issue 24
point 1 owns making those per generation.
"""

from __future__ import annotations

from typing import Literal

from mpsim.hw_models.schema import GpuSpec

Generation = Literal["ampere", "hopper", "blackwell"]
CandidateFamily = Literal["ampere", "hopper"]
SassArch = Literal["sm_80", "sm_90a"]

# Smallest dense fp16 FLOP/clk/SM of each tensor-core generation, highest first.
GENERATION_MIN_FP16_RATE: tuple[tuple[Generation, float], ...] = (
    ("blackwell", 8192), ("hopper", 4096), ("ampere", 0))
CANDIDATE_FAMILY: dict[Generation, CandidateFamily] = {
    "ampere": "ampere",
    "hopper": "hopper",
    "blackwell": "hopper",  # assumption: Hopper's tiles until Blackwell's tcgen05 tiles are modelled
}


SASS_ARCH: dict[Generation, SassArch] = {
    "ampere": "sm_80",    # A100; Ada (sm_89) runs sm_80-class code (mma.sync, no wgmma)
    "hopper": "sm_90a",
    "blackwell": "sm_90a",  # assumption: no sm_100 count yet (see the module docstring)
}


def generation(hw: GpuSpec) -> Generation:
    """The tensor-core generation of `hw`, by its dense fp16 FLOP per clock per SM."""
    rate = hw.tensor_core.flops_per_clock_per_SM["fp16"]  # the loader requires fp16
    return next(gen for gen, least in GENERATION_MIN_FP16_RATE if rate >= least)


def candidate_family(hw: GpuSpec) -> CandidateFamily:
    """The candidate set of mpsim's GEMM kernels on `hw` (see CANDIDATE_FAMILY)."""
    return CANDIDATE_FAMILY[generation(hw)]


def sm_major(arch: SassArch) -> int:
    """The compute capability's major version of a SASS arch ("sm_90a" -> 9, "sm_80" -> 8)."""
    return int(arch.removeprefix("sm_").rstrip("a")) // 10


def sass_arch(hw: GpuSpec) -> SassArch:
    """Which rows of mpsim/sim/gpu/sass_table.py price mpsim's kernels on `hw` (see SASS_ARCH)."""
    return SASS_ARCH[generation(hw)]
