"""TensorRT-LLM's fp8_block_scaling_gemm by SM version (mpsim/library/trtllm_fp8.py): on Hopper the
DeepGEMM copy TensorRT-LLM vendors, at that copy's own heuristic (jit_utils.cuh), swap-AB below
M = 32, priced with DeepGEMM's work model at its own MMA share; and the quantizers around it."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import ARCH_CONFIGS
from mpsim.library.deepgemm import deepgemm_config
from mpsim.library.scaled_gemm import QUANT_GROUP, QUANT_GROUP_TRITON, QUANT_GROUPS_IN_TURN, with_call
from mpsim.library.trtllm_fp8 import (
    SM90_SMEM,
    TRTLLM_FP8_BLOCK_GEMM,
    _sm90_smem,
    candidates,
    fp8_block_sm90_config,
    sm90_block_layout,
)
from mpsim.sim.gpu.library.call_quant import quant_parts
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS, with_params

H200 = load_hardware("h200-sxm")


def test_the_vendored_heuristic_takes_the_fewest_waves_then_the_fullest_last_one() -> None:
    # 16384 x 256: 128-row token tiles (no 256 in this copy), 128 weight rows: 256 tiles, 2 waves
    assert sm90_block_layout(16384, 256, 3072, 132, swap=False)[:2] == (128, 128)
    assert deepgemm_config(16384, 256, 3072, 132).block_m == 256  # DeepGEMM's current heuristic
    # 3073 x 1024: 25 token tiles; BLOCK_N 104 and 112 both give 250 tiles (2 waves, 118 CTAs in the
    # last), 120 gives 225 (93), 128 gives 200 (68): the fullest last wave, then the narrower
    assert sm90_block_layout(3073, 1024, 4096, 132, swap=False)[:2] == (128, 104)
    assert sm90_block_layout(64, 4096, 4096, 132, swap=False)[0] == 64  # M <= 64: 64-row tiles


def test_stages_are_the_deepest_that_fit_and_fewer_when_block_n_straddles_a_scale_block() -> None:
    for rows, cols, k in ((16384, 256, 3072), (3073, 1024, 51200), (256, 4096, 65536)):
        bm, bn, stages = sm90_block_layout(rows, cols, k, 132, swap=False)
        choices = (8, 7, 6, 5, 4) if 128 % bn == 0 else (6, 5, 4)
        assert stages == next(s for s in choices if _sm90_smem(s, k, bm, bn, False) <= SM90_SMEM)


def test_below_32_tokens_the_weights_take_the_mmas_m_side() -> None:
    small = fp8_block_sm90_config(8, 4096, 4096, 132)
    extra = dict(small.extra)
    assert extra["swap_ab"] == 1 and extra["mma_m"] == 8
    assert (small.block_m, small.block_n) == (16, 128)  # tokens 16 (the narrowest), weights 128
    assert fp8_block_sm90_config(8, 64, 4096, 132).block_n == 64  # N <= 64: 64-row weight tiles
    assert dict(fp8_block_sm90_config(32, 4096, 4096, 132).extra)["swap_ab"] == 0
    assert small.grid == (32,)  # one CTA per 128 weight rows: 32 of 132 SMs busy


def test_the_architecture_picks_the_kernels_config() -> None:
    ada = ARCH_CONFIGS[TRTLLM_FP8_BLOCK_GEMM](TRTLLM_FP8_BLOCK_GEMM, 64, 4096, 4096, 8, 128, 142, "ada")
    hopper = ARCH_CONFIGS[TRTLLM_FP8_BLOCK_GEMM](TRTLLM_FP8_BLOCK_GEMM, 64, 4096, 4096, 8, 128, 132,
                                                  "hopper")
    assert dict(ada.extra)["sm"] == 89 and "sm" not in dict(hopper.extra)
    assert candidates(TRTLLM_FP8_BLOCK_GEMM, 64, 4096, 4096, 132, "hopper") == [hopper]
    with pytest.raises(ValueError, match="fp8_swap_ab_gemm"):
        candidates(TRTLLM_FP8_BLOCK_GEMM, 64, 4096, 4096, 148, "blackwell")


def test_hopper_prices_the_vendored_copy_at_its_own_mma_share() -> None:
    cfg = fp8_block_sm90_config(4096, 4096, 4096, 132)
    row = gemm_row(4096, 4096, 4096, "fp8-block", 8, kernel=TRTLLM_FP8_BLOCK_GEMM, config=cfg)
    base = price_launch(row, H200)["time_s"]
    slower = price_launch(row, H200, params=with_params(DEFAULT_PARAMS, {"trtllm_fp8.block_sm90_eta": 0.5}))
    assert slower["time_s"] > base * 1.3  # compute-bound: the share sets the time
    same = price_launch(row, H200, params=with_params(DEFAULT_PARAMS, {"trtllm_fp8.block_sm89_eta": 0.3}))
    assert same["time_s"] == base  # Ada's share is not read on Hopper


def test_the_triton_quantizer_takes_its_four_groups_in_turn_and_no_k_factor() -> None:
    r = gpu_rates(load_hardware("b200-sxm"), DEFAULT_PARAMS)
    q = DEFAULT_PARAMS.fp8_act
    row = {"m": 1, "n": 4096, "k": 16384, "w_format": "fp8-block"}

    def latency_ns(quant: int) -> float:
        parts = quant_parts(row, json.loads(json.dumps({"quant": quant})), r, q)
        assert len(parts) == 1
        lat = parts[0].work.trip.latency_ns
        assert lat is not None
        return lat

    assert latency_ns(QUANT_GROUP) == pytest.approx(2 * q.group_round_ns)  # ceil(16384 / 8192) rounds
    assert latency_ns(QUANT_GROUP_TRITON) == pytest.approx(QUANT_GROUPS_IN_TURN[QUANT_GROUP_TRITON]
                                                           * q.group_round_ns)
    cfg = with_call(fp8_block_sm90_config(1, 4096, 4096, 132), QUANT_GROUP, 0)
    assert json.loads(gemm_row(1, 4096, 4096, "fp8-block", 8, kernel=TRTLLM_FP8_BLOCK_GEMM,
                               config=cfg)["config"])["quant"] == QUANT_GROUP
