"""TensorRT-LLM's fp8 (cuBLASLt) and nvfp4 GEMMs as CTA work (names, configs and row builders:
mpsim/library/trtllm_fp8.py); the work model is mpsim/sim/gpu/library/scaled_gemm.py's. Constants:
TrtllmFp8Params, SimParams.trtllm_fp8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpsim.library.scaled_gemm import SM89
from mpsim.library.trtllm_fp8 import KERNELS, TRTLLM_FP8_BLOCK_GEMM, TRTLLM_NVFP4_GEMM
from mpsim.sim.gpu.library.scaled_gemm import ScaledGemmParams, scaled_gemm_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


@dataclass(frozen=True)
class TrtllmFp8Params(ScaledGemmParams):
    """SimParams.trtllm_fp8 (`--fit-params trtllm_fp8.NAME`): mma_eta fitted on H200 TRT-LLM 1.3.0rc20
    fp8 rows (`--select fp8`, 200 sampled: 0.9 at fp8_tensor_energy 1.15), rescanned at stop 54 with the
    energy at 1.0 on the 2,000-row `--select fp8` samples' rows (H200 / H100 M 257-8192 MAPE 8.1 / 6.6%
    at 0.9, 6.6 / 5.5 at 0.85, 7.0 / 6.1 at 0.8): 0.85; tile_ns cuBLAS's (the fit kept it); nvfp4 GEMM
    (its untuned 128 x 256 tile, mpsim/library/trtllm_fp8.py `nvfp4_default_config`): no constant of its
    own, its MMAs at SimParams.fp4_mma_eta (set on these rows; a fixed cost fitted with it went to zero,
    so none is kept: the 1500 ns and 0.6 of the tiles searched before). Ada's blockwise kernel
    (`trtllm_fp8_block_gemm`): block_sm89_eta of the fp8 rate instead of sm89_mma_eta, fitted with the
    one-partition L2 rate (SimParams.l2_one_partition_bytes_per_clk) on the even half of an 800-row
    sample of the L40S TRT-LLM 1.3.0rc20 fp8_block rows (0.706; at 1.0 M 1-16 / 17-256 were +7..+9%
    biased), the odd half 13.4 / 7.8 / 5.9% by M band; the same share as vLLM's Triton block kernel on
    Ada (triton_fp8.sm89_mma_eta 0.70): both are mma.sync fp8 loops that promote every 128-wide K block
    on the CUDA cores. One kernel on one device. On Hopper the same op is TensorRT-LLM's vendored
    DeepGEMM (mpsim/library/trtllm_fp8.py `fp8_block_sm90_config`): DeepGEMM's design, priced with
    DeepGEMM's constants (SimParams.deepgemm) but its own MMA share, block_sm90_eta."""

    mma_eta: float = 0.85
    block_sm89_eta: float = 0.70
    # the vendored DeepGEMM's MMAs on Hopper (`trtllm_fp8_block_gemm` at fp8_block_sm90_config),
    # its share of the fp8 rate in DeepGEMM's work model: fitted on the H200 TensorRT-LLM 1.3.0rc20
    # fp8_block rows (400-row `stacks` sample; all-band MAPE 14.8 / 14.0 / 13.8 / 13.8 / 15.2% at
    # 0.95 (DeepGEMM's own) / 0.85 / 0.80 / 0.75 / 0.65, bias -6.5 -> -2.9% at 0.80); checked on
    # H100 1.3.0rc20's (13.4 -> 12.7%) and H200 1.2.0rc5's (8.7%). The same op's rows run 1.17x
    # (M 17-8192) to 1.37x (M > 8192) SGLang's current-DeepGEMM rows of the same shapes (median
    # ratio of the 29,268 shapes both H200 tables publish): an older copy of the design.
    block_sm90_eta: float = 0.80
    # cuBLASLt's fp8 kernel pays nothing for its token box's rows beyond M (SimParams.tma_edge_cost):
    # its rows rise through each token tile as cuBLAS's bf16 ones do (H200 TensorRT-LLM 1.3.0rc20,
    # n 3072, k 12288: 27.6 / 33.7 / 35.3 us at M 129 / 192 / 256; n = k = 8192: 37.4 / 40.3 / 42.1),
    # where the vendored DeepGEMM's fall (62.0 / 51.4 / 32.3). With the cost its `--select fp8` rows
    # went 6.2 -> 6.8% (H200) and 4.8 -> 5.2% (H100); the vendored DeepGEMM (p.deepgemm's) keeps it
    tma_edge: bool = False


def trtllm_fp8_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
              p: SimParams, resident: float) -> LaunchWork:
    gp = p.trtllm_fp8
    if row["kernel"] == TRTLLM_NVFP4_GEMM:
        gp = replace(gp, mma_eta=1.0)  # mma_eta is the cuBLASLt fp8 kernel's; fp4: SimParams.fp4_mma_eta
    elif row["kernel"] == TRTLLM_FP8_BLOCK_GEMM:
        if int(cfg.get("sm", 0)) != SM89:  # Hopper: the vendored DeepGEMM
            return scaled_gemm_work(row, cfg, r, p, replace(p.deepgemm, mma_eta=gp.block_sm90_eta), resident)
        gp = replace(gp, sm89_mma_eta=gp.block_sm89_eta)
    return scaled_gemm_work(row, cfg, r, p, gp, resident)


WORK = dict.fromkeys(KERNELS, trtllm_fp8_work)
