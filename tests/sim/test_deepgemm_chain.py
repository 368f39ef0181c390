"""DeepGEMM's lone math warpgroup on Hopper (mpsim/sim/gpu/library/scaled_gemm.py `chain_wait`):
a 1D2D kernel at BLOCK_M <= 64 waits for its wgmma chain before it promotes, so every K step lasts
at least `chain_cycles`, its MMAs and promotion included; two math warpgroups, unpromoted kernels
and Blackwell's UMMA pay none."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.launch_plan import gemm_row
from mpsim.library.deepgemm import DEEPGEMM_FP8_BLOCK_GEMM, deepgemm_config
from mpsim.library.deepgemm_sm100 import deepgemm_sm100_config
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.gpu.work import Trip, cuda_cycles, tensor_cycles
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS, SimParams

H200, B200 = load_hardware("h200-sxm"), load_hardware("b200-sxm")
assert isinstance(H200, GpuSpec) and isinstance(B200, GpuSpec)
SMS = {H200.name: gpu_rates(H200, DEFAULT_PARAMS).sms, B200.name: gpu_rates(B200, DEFAULT_PARAMS).sms}


def _trip(m: int, n: int, k: int, params: SimParams = DEFAULT_PARAMS, hw: GpuSpec = H200,
          cfg: LaunchConfig | None = None) -> tuple[Trip, LaunchConfig]:
    cfg = cfg or deepgemm_config(m, n, k, SMS[hw.name])
    row = gemm_row(m, n, k, "fp8-block", 8, kernel=DEEPGEMM_FP8_BLOCK_GEMM, config=cfg)
    return launch_work(row, gpu_rates(hw, params), params, 0.0)[-1].work.trip, cfg


def test_a_lone_math_warpgroup_waits_its_chain_less_its_own_mma_and_promotion() -> None:
    trip, cfg = _trip(8, 2048, 8192)
    assert (cfg.block_m, cfg.block_n, cfg.num_warps) == (16, 16, 8)  # one math warpgroup
    chain = DEFAULT_PARAMS.deepgemm.chain_cycles
    assert chain > 0
    r = gpu_rates(H200, DEFAULT_PARAMS)
    busy = tensor_cycles(trip, r) + cuda_cycles(trip, r)
    assert 0 < busy < chain
    assert trip.overhead_cycles == pytest.approx(chain - busy, rel=1e-12)


def test_two_math_warpgroups_hide_it() -> None:
    trip, cfg = _trip(4096, 4096, 4096)
    assert cfg.num_warps == 12
    assert trip.overhead_cycles == 0.0


def test_a_long_mma_covers_it() -> None:
    params = replace(DEFAULT_PARAMS, deepgemm=replace(DEFAULT_PARAMS.deepgemm, chain_cycles=10.0))
    trip, _ = _trip(8, 2048, 8192, params)
    assert tensor_cycles(trip, gpu_rates(H200, params)) > 10.0
    assert trip.overhead_cycles == 0.0


def test_blackwells_umma_kernel_does_not_promote_so_pays_none() -> None:
    cfg = deepgemm_sm100_config(DEEPGEMM_FP8_BLOCK_GEMM, 8, 2048, 8192, SMS[B200.name])
    trip, _ = _trip(8, 2048, 8192, hw=B200, cfg=cfg)
    assert trip.overhead_cycles == 0.0


def test_the_wait_sets_a_floor_of_k_steps_times_the_chain() -> None:
    m, n, k = 8, 2048, 16384
    row = gemm_row(m, n, k, "fp8-block", 8, kernel=DEEPGEMM_FP8_BLOCK_GEMM,
                   config=deepgemm_config(m, n, k, SMS[H200.name]))
    off = replace(DEFAULT_PARAMS, deepgemm=replace(DEFAULT_PARAMS.deepgemm, chain_cycles=0.0))
    with_chain = price_launch(row, H200, params=DEFAULT_PARAMS)["kernel_s"]
    without = price_launch(row, H200, params=off)["kernel_s"]
    clock = gpu_rates(H200, DEFAULT_PARAMS).clock_hz
    floor = (k // 128) * DEFAULT_PARAMS.deepgemm.chain_cycles / clock
    assert with_chain >= floor
    assert with_chain > without
