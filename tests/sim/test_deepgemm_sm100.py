"""DeepGEMM on Blackwell (mpsim/library/deepgemm_sm100.py): sm100.hpp's layouts by hand, the
architecture's choice, and the clusters' loads in the scaled-GEMM work model."""

from __future__ import annotations

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import ARCH_CONFIGS
from mpsim.library.deepgemm import DEEPGEMM_FP8_BLOCK_GEMM, candidates
from mpsim.library.deepgemm_sm100 import Sm100Layout, deepgemm_sm100_config, sm100_layout, stages
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS

B200 = load_hardware("b200-sxm")


def test_a_cluster_of_two_wins_then_the_fewest_waves_then_the_fullest_last_one() -> None:
    # M 3073: 25 token tiles of 128 do not pair, so the swapped layouts cluster along N (48 weight
    # tiles); 5 waves at BLOCK_M 208..256, the last fullest at 208 (720 blocks: 128 in the last)
    assert sm100_layout(3073, 6144, 16384, 148) == Sm100Layout(True, 208, 128, 1, 2)
    # M 16384: 128 token tiles pair; 128 x 256 and the swapped 256 x 128 both run 4096 blocks in 28
    # waves: the first of equals, not swapped, clustered along M
    assert sm100_layout(16384, 8192, 10240, 148) == Sm100Layout(False, 128, 256, 2, 1)
    # M 8: one wave either way; the swapped 16-token tile clusters, the unswapped 32 cannot
    assert sm100_layout(8, 4096, 4096, 148) == Sm100Layout(True, 16, 128, 1, 2)


def test_stages_fill_the_shared_memory() -> None:
    lay = Sm100Layout(False, 128, 256, 2, 1)
    per_stage = (128 + 128) * 128 + (128 + 256) * 4
    assert stages(lay) == (232448 - 128 * 128 * 2 - (32 * 24 + 48 + 8 + 4)) // per_stage


def test_blackwell_takes_the_sm100_layout_and_hopper_keeps_its_own() -> None:
    hopper = ARCH_CONFIGS[DEEPGEMM_FP8_BLOCK_GEMM](DEEPGEMM_FP8_BLOCK_GEMM, 4096, 4096, 4096, 8, 128,
                                                   132, "hopper")
    blackwell = ARCH_CONFIGS[DEEPGEMM_FP8_BLOCK_GEMM](DEEPGEMM_FP8_BLOCK_GEMM, 4096, 4096, 4096, 8,
                                                      128, 148, "blackwell")
    assert dict(hopper.extra)["promote"] == 1 and dict(hopper.extra)["umma"] == 0
    assert dict(blackwell.extra)["promote"] == 0 and dict(blackwell.extra)["umma"] == 1
    assert candidates(DEEPGEMM_FP8_BLOCK_GEMM, 4096, 4096, 4096, 148, "blackwell") == [blackwell]


@pytest.mark.parametrize(("m", "n", "k"), [(3073, 6144, 16384), (16384, 8192, 10240)])
def test_a_cluster_loads_half_of_the_tile_it_shares(m: int, n: int, k: int) -> None:
    cfg = deepgemm_sm100_config(DEEPGEMM_FP8_BLOCK_GEMM, m, n, k, 148)
    extra = dict(cfg.extra)
    row = gemm_row(m, n, k, "fp8-block", 8, kernel=DEEPGEMM_FP8_BLOCK_GEMM, config=cfg)
    r = gpu_rates(B200, DEFAULT_PARAMS)
    trip = launch_work(row, r, DEFAULT_PARAMS, 0.0)[-1].work.trip
    tokens, weights = cfg.block_m, cfg.block_n
    scales = tokens * 4 + -(-weights // 128) * 4
    if extra.get("pair_n"):
        assert trip.load_bytes == (tokens / 2 + weights) * 128 + scales
    else:
        assert extra["pair"] == 1 and trip.load_bytes == (tokens + weights / 2) * 128 + scales
