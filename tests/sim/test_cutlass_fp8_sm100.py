"""vLLM's cutlass_scaled_mm on Blackwell: the sm100 fp8 dispatch read from its source
(scaled_mm_sm100_fp8_dispatch.cuh), the config every path takes on a Blackwell GPU (validation's
candidates, the engines' ARCH_CONFIGS), and its rows priced with tcgen05 (`umma`)."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import ARCH_CONFIGS
from mpsim.library.cutlass_fp8 import (
    CUTLASS_FP8_BLOCK_GEMM,
    CUTLASS_FP8_GEMM,
    SM100_EPI_CARVEOUT,
    SM100_SMEM,
    candidates,
    cutlass_fp8_block_heuristic,
    cutlass_fp8_heuristic,
    cutlass_fp8_sm100_heuristic,
)
from mpsim.sim.launch import price_launch

B200 = load_hardware("b200-sxm")
SMS = 148


def _layout(m: int, k: int, n: int = 8192) -> tuple[object, ...]:
    c = cutlass_fp8_sm100_heuristic(m, n, k, SMS)
    x = dict(c.extra)
    return c.block_m, c.block_n, c.block_k, x["swap_ab"], x["pair"], x.get("pair_n", 0)


@pytest.mark.parametrize(("m", "k", "want"), [
    (1, 4096, (32, 128, 128, 1, 0, 1)),      # M16_swap_ab: 128 x 32 x 128, cluster 4 x 1
    (16, 1024, (32, 128, 128, 1, 0, 1)),
    (17, 4096, (64, 128, 256, 1, 0, 1)),     # M64_swap_ab: 128 x 64 x 256, cluster 4 x 1
    (64, 4096, (64, 128, 256, 1, 0, 1)),     # M = 64 swaps from K = 4096
    (63, 1024, (64, 128, 256, 1, 0, 1)),     # ... and below M = 64 at any K
    (64, 4095, (64, 64, 128, 0, 0, 0)),      # M64: 64 x 64 x 128, no cluster
    (65, 4096, (128, 128, 128, 0, 1, 0)),    # M256: 128 x 128 x 128, cluster 2 x 1
    (256, 4096, (128, 128, 128, 0, 1, 0)),
    (257, 4096, (128, 128, 128, 0, 1, 1)),   # default: 256 x 128 x 128 (2-SM pairs), cluster 2 x 2
])
def test_the_dispatch_follows_vllms_sm100_source(m: int, k: int, want: tuple[int, ...]) -> None:
    assert _layout(m, k) == want


def test_every_config_is_persistent_tcgen05_and_fills_the_shared_memory() -> None:
    """Persistent CTAs (at most one an SM), the tcgen05 MMA, and as many stages as the shared memory
    holds after the epilogue's carve-out (each stage: the token and weight K steps, halved where a
    cluster shares them)."""
    for m, k in [(1, 4096), (32, 8192), (64, 2048), (128, 4096), (4096, 4096)]:
        c = cutlass_fp8_sm100_heuristic(m, 16384, k, SMS)
        x = dict(c.extra)
        assert x["umma"] == 1 and c.grid[0] <= SMS
        tt = c.block_m // 2 if x.get("pair_n") else c.block_m
        wt = c.block_n // 2 if x["pair"] else c.block_n
        stage = (tt + wt) * c.block_k
        assert c.num_stages * stage <= SM100_SMEM - SM100_EPI_CARVEOUT < (c.num_stages + 1) * stage


def test_blackwell_rows_take_the_sm100_dispatch_on_every_path() -> None:
    """Validation's candidates and the engines' ARCH_CONFIGS give the sm100 config on Blackwell and
    the sm90 one on Hopper; the blockwise kernel keeps its sm90 tile on both."""
    m, n, k = 512, 4096, 4096
    sm100 = cutlass_fp8_sm100_heuristic(m, n, k, SMS)
    assert candidates(CUTLASS_FP8_GEMM, m, n, k, SMS, "blackwell") == [sm100]
    assert ARCH_CONFIGS[CUTLASS_FP8_GEMM](CUTLASS_FP8_GEMM, m, n, k, 8, None, SMS, "blackwell") == sm100
    assert candidates(CUTLASS_FP8_GEMM, m, n, k, 132, "hopper") == [cutlass_fp8_heuristic(m, n, k, 132)]
    assert candidates(CUTLASS_FP8_BLOCK_GEMM, m, n, k, SMS, "blackwell") == [
        cutlass_fp8_block_heuristic(m, n, k, SMS)]


def test_a_swapped_token_tile_runs_whole_on_b200() -> None:
    """M <= 16 runs 32-token tiles: M = 1 and M = 16 price alike, a row of tcgen05 (`umma`)."""
    def us(m: int) -> float:
        cfg = cutlass_fp8_sm100_heuristic(m, 8192, 8192, SMS)
        row = gemm_row(m, 8192, 8192, "fp8", 8, kernel=CUTLASS_FP8_GEMM, sms=SMS, config=cfg)
        assert json.loads(row["config"])["umma"] == 1
        return float(price_launch(row, B200)["time_s"]) * 1e6
    assert us(1) == pytest.approx(us(16), rel=0.01)
