"""A TMA box's rows beyond the tensor's edge on Hopper (SimParams.tma_edge_cost): a scaled GEMM's
last token tile past M loads the chip's L2 with its zero-filled rows, so inside one token tile more
tokens can cost less (the H200 TensorRT-LLM fp8_block rows: n 3072, k 12288 takes 62.0 us at M 129
and 32.3 at M 256), while a launch of a few CTAs does not feel it (n 128, k 16384, M 129: 23.9 us)."""

from __future__ import annotations

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library.trtllm_fp8 import TRTLLM_FP8_BLOCK_GEMM, fp8_block_sm90_config
from mpsim.sim.gpu.library.scaled_gemm import edge_bytes
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.gpu.work import Trip
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS, SimParams, with_params

H200 = load_hardware("h200-sxm")
NO_EDGE = with_params(DEFAULT_PARAMS, {"tma_edge_cost": 0.0})


def _us(m: int, n: int, k: int, params: SimParams = DEFAULT_PARAMS) -> float:
    cfg = fp8_block_sm90_config(m, n, k, 132)
    row = gemm_row(m, n, k, "fp8-block", 8, kernel=TRTLLM_FP8_BLOCK_GEMM, config=cfg)
    return float(price_launch(row, H200, params=params)["time_s"]) * 1e6


def test_the_rows_beyond_m_load_the_l2_at_the_cost_on_hopper_only() -> None:
    r = gpu_rates(H200, DEFAULT_PARAMS)
    assert r.tma_edge_cost == DEFAULT_PARAMS.tma_edge_cost == 4.0
    assert gpu_rates(load_hardware("h100-sxm"), DEFAULT_PARAMS).tma_edge_cost == 4.0
    for name in ("b200-sxm", "l40s", "a100-sxm-80gb"):
        assert gpu_rates(load_hardware(name), DEFAULT_PARAMS).tma_edge_cost == 0.0
    assert edge_bytes(129, 128, 128.0, r) == 127 * 128 * 4.0  # one row in, 127 beyond
    assert edge_bytes(256, 128, 128.0, r) == 0.0
    assert edge_bytes(65, 64, 128.0, r) == 63 * 128 * 4.0


def _trip(m: int, params: SimParams = DEFAULT_PARAMS) -> Trip:
    cfg = fp8_block_sm90_config(16, 1024, 4096, 132)  # swap-AB: 16 tokens x 128 weight rows
    row = gemm_row(m, 1024, 4096, "fp8-block", 8, kernel=TRTLLM_FP8_BLOCK_GEMM, config=cfg)
    return launch_work(row, gpu_rates(H200, params), params, 0.0)[-1].work.trip


def test_the_rows_beyond_m_take_no_port_time() -> None:
    # the same 16-token box at M 8 and 16: the port moves 8 token rows of 128 fp8 bytes fewer, and
    # the L2 takes them as edge bytes instead
    full, half = _trip(16), _trip(8)
    assert full.load_bytes - half.load_bytes == pytest.approx(8 * 128)
    assert full.edge_bytes == 0.0 and half.edge_bytes == pytest.approx(8 * 128 * 4.0)
    # without the edge rule (tma_edge_cost 0: off Hopper) the box moves whole
    assert _trip(8, NO_EDGE).load_bytes == full.load_bytes


def test_a_full_token_tile_runs_faster_than_one_row_past_the_last() -> None:
    # the same grid (2 x 64 tiles of 128 x 48) at M 129 and 256: the edge doubles the time
    assert fp8_block_sm90_config(129, 3072, 12288, 132) == fp8_block_sm90_config(256, 3072, 12288, 132)
    t129, t256 = _us(129, 3072, 12288), _us(256, 3072, 12288)
    assert t129 > 1.5 * t256
    assert _us(129, 3072, 12288, NO_EDGE) <= t256  # without the edge more M never costs less here


def test_a_few_ctas_do_not_load_the_chip() -> None:
    # 16 CTAs: their rows beyond M stay far below the chip's L2 rate
    assert _us(129, 128, 16384) == pytest.approx(_us(129, 128, 16384, NO_EDGE), rel=0.02)


def test_cublaslts_fp8_kernel_pays_no_edge() -> None:
    """TensorRT-LLM's per-tensor fp8 GEMM (cuBLASLt) rises through a token tile like cuBLAS's bf16
    kernels (TrtllmFp8Params.tma_edge): the cost leaves its price unchanged."""
    from mpsim.library.trtllm_fp8 import TRTLLM_FP8_GEMM

    row = gemm_row(129, 3072, 12288, "fp8", 8, kernel=TRTLLM_FP8_GEMM)
    shipped = price_launch(row, H200)["time_s"]
    assert shipped == price_launch(row, H200, params=NO_EDGE)["time_s"]
    with_edge = with_params(DEFAULT_PARAMS, {"trtllm_fp8.tma_edge": True})
    assert price_launch(row, H200, params=with_edge)["time_s"] > 1.1 * shipped  # 22.8 -> 26.9 us
