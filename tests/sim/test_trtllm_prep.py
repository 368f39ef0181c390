"""TensorRT-LLM's QKV-preprocessing kernel (applyBiasRopeUpdateKVCacheV2): its launch, read from the
source (mpsim/library/trtllm_attention.py `prep_rounds`), and its price (mpsim/sim/gpu/library/
trtllm_attention.py `prep_part`): blocks for every query head, 16 tokens a 256-thread block at
head_dim 128, grid.x by calGridSizeWithBestEfficiency."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.library.trtllm_attention import prep_grid_x, prep_rounds
from mpsim.sim.gpu.library.trtllm_attention import prep_part
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS


def test_grid_x_takes_the_first_fullest_wave_count() -> None:
    # 64 query heads, 592 blocks a wave (4 blocks of 256 threads on 148 SMs): 37 x 64 = 4 waves exactly
    assert prep_grid_x(128, 64, 592) == 37
    # 32 token blocks: no whole wave count reachable; 9 x 64 = 576 of 592 (0.973) comes first, and the
    # later ties (18, 27) are not strictly better
    assert prep_grid_x(32, 64, 592) == 9
    assert prep_grid_x(1, 64, 592) == 1


@pytest.mark.parametrize(("batch", "q_len", "heads", "head_dim", "sms", "want"), [
    (1, 1, 32, 128, 148, (256, 1)),        # one token, 32 heads: one round
    (2048, 1, 64, 128, 148, (256, 16)),    # 128 token blocks -> grid.x 37: 4 waves x 4 strides
    (2048, 1, 32, 128, 148, (256, 8)),     # 37 x 32 = 2 waves, 4 strides
    (512, 1, 64, 128, 148, (256, 4)),      # grid.x 9: 1 wave, 4 strides
    (2048, 1, 64, 64, 148, (256, 8)),      # head_dim 64: 32 tokens a block, 64 token blocks
    (8, 1, 32, 512, 148, (32, 4)),         # head_dim 512: the V1 kernel, a warp a (token, head); grid.z 2
    (64, 1, 32, 512, 148, (32, 4)),        # V1: grid.z = min(148, 16) = 16, 4 sequences a warp
])
def test_rounds_follow_the_launch(batch: int, q_len: int, heads: int, head_dim: int, sms: int,
                                  want: tuple[int, int]) -> None:
    assert prep_rounds(batch, q_len, heads, head_dim, sms) == want


def test_the_price_grows_with_the_query_heads_not_only_the_kv_heads() -> None:
    hw: GpuSpec = load_hardware("b200-sxm")  # type: ignore[assignment]
    p = replace(DEFAULT_PARAMS, trtllm=replace(DEFAULT_PARAMS.trtllm, prep_round_ns=1000.0))
    r = gpu_rates(hw, p)
    few = prep_part(2048, 1, 16, 2, 128, 16, False, r, p)
    many = prep_part(2048, 1, 64, 2, 128, 16, False, r, p)
    assert few.work.iters_by_class == (prep_rounds(2048, 1, 16, 128, r.sms)[1],)
    assert many.work.iters_by_class[0] > few.work.iters_by_class[0]
    # bytes: Q, K, V read in bf16; Q written (e4m3 when asked) and K, V appended in the cache's format
    assert many.work.dram_read_bytes == 2048 * (64 + 4) * 128 * 2
    assert many.work.dram_write_bytes == 2048 * 128 * (64 * 2 + 4 * 2)
    fp8 = prep_part(2048, 1, 64, 2, 128, 8, True, r, p)
    assert fp8.work.dram_write_bytes == 2048 * 128 * (64 + 4)
