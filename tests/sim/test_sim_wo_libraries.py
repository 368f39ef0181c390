"""Weight-only GEMM libraries (TRT-LLM CUTLASS fpA_intB, Marlin, Machete, TurboMind): configs as
each library picks them, the bytes a weight costs, and the work model's monotonicity
(the rooms mpsim/library/{trtllm,marlin,machete,turbomind}.py and their simulator-floor twins)."""

from __future__ import annotations

import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import gemm_row
from mpsim.library import EXTERNAL_KERNELS, WO_GEMM_KERNELS
from mpsim.library.machete import MACHETE_GEMM, machete_tile
from mpsim.library.marlin import MARLIN_GEMM, marlin_config
from mpsim.library.trtllm import TRTLLM_WO_GEMV, plugin_candidates, trtllm_wo_config
from mpsim.library.trtllm_fpaintb import (
    FPAINTB_SM80_TILES,
    TRTLLM_FPAINTB,
    fpaintb_candidates,
    fpaintb_config,
)
from mpsim.library.turbomind import TURBOMIND_GEMM
from mpsim.library.wo_tiled import SCHED_DP, SCHED_SPLIT_K, SCHED_STREAM_K
from mpsim.sim.best_config import gemm_candidate_configs
from mpsim.sim.gpu.library import EXTERNAL
from mpsim.sim.gpu.library.marlin import MARLIN
from mpsim.sim.gpu.library.trtllm_fpaintb import FPAINTB
from mpsim.sim.gpu.library.wo_tiled import WoLoop, split_peers, wo_tiled_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.launch import price_launch
from mpsim.sim.params import DEFAULT_PARAMS

H200 = load_hardware("h200-sxm")


def _time(kernel: str, m: int, n: int, k: int, bits: int = 4, group: int | None = 128) -> float:
    row = gemm_row(m, n, k, "group", bits, group, kernel=kernel, sms=H200.compute_units)
    return float(price_launch(row, H200)["time_s"])


def test_every_library_is_priced_by_name() -> None:
    for kernel in WO_GEMM_KERNELS:
        assert kernel in EXTERNAL and kernel in EXTERNAL_KERNELS
        assert _time(kernel, 16, 4096, 4096) > 0


def test_machete_tile_is_the_generated_heuristic() -> None:
    assert machete_tile(1, 4096, 4096) == (128, 16)
    assert machete_tile(8, 28672, 4096) == (256, 16)       # N >= 26624
    assert machete_tile(24, 4096, 4096) == (128, 32)       # M 17-32, K <= 12288, N <= 8192
    assert machete_tile(48, 12288, 16384) == (256, 64)     # M 33-64, K >= 16384, N >= 12288
    assert machete_tile(100, 4000, 4000) == (128, 32)      # M 65-128, K and N <= 4069
    assert machete_tile(100, 4096, 4096) == (128, 128)     # the source's 4069 bound: 4096 > 4069
    assert machete_tile(300, 4096, 4096) == (128, 128)
    assert machete_tile(300, 8192, 8192) == (128, 256)


def test_marlin_thread_config_is_the_first_valid_of_its_table() -> None:
    small = marlin_config(1, 4096, 4096, 4, 128)
    assert (small.block_k, small.block_n, small.num_warps, small.block_m) == (128, 128, 8, 16)
    large = marlin_config(48, 4096, 4096, 4, 128)
    assert (large.block_k, large.block_n, large.block_m) == (64, 256, 48)   # 3 m-blocks of 16
    odd_n = marlin_config(48, 4096 + 128, 4096, 4, 128)   # N % 256 != 0: next entry (64, 128)
    assert (odd_n.block_k, odd_n.block_n, odd_n.num_warps) == (64, 128, 4)
    assert marlin_config(1, 4096, 4096, 4, 128, sms=132).grid == (132,)   # one CTA per SM
    with pytest.raises(ValueError, match="no thread config"):
        marlin_config(1, 4096 + 32, 4096, 4, 128)


def test_fpaintb_candidates_are_the_sm90_tactics_and_the_gemv_is_a_tactic_below_16() -> None:
    cands = fpaintb_candidates(16, 4096, 4096, 4, 132)
    assert sorted({(c.block_n, c.block_m) for c in cands}) == sorted(
        (wt, tt) for wt in (64, 128) for tt in (16, 32, 64, 128, 256))
    assert {c.block_k for c in cands} == {64}
    # gemmPluginProfiler: the CUDA kernel is a tactic for M < 16 (checkTactic), not at 16
    assert [c.kernel for c in plugin_candidates(15, 4096, 4096, 4, 132)][-1] == TRTLLM_WO_GEMV
    assert TRTLLM_WO_GEMV not in {c.kernel for c in plugin_candidates(16, 4096, 4096, 4, 132)}
    gemv = plugin_candidates(8, 4096, 4096, 4, 132)[-1]
    row = gemm_row(8, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_FPAINTB, config=gemv)
    assert row["kernel"] == TRTLLM_WO_GEMV and row["m"] == 8
    cutlass = plugin_candidates(4, 4096, 4096, 4, 132)[0]   # the CUTLASS tiles run at any M
    assert gemm_row(4, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_FPAINTB,
                    config=cutlass)["kernel"] == TRTLLM_FPAINTB
    # without a profiled choice, the older plugins' rule: the GEMV below M = 5
    assert gemm_row(4, 4096, 4096, "group", 4, 4096, kernel=TRTLLM_FPAINTB)["kernel"] == TRTLLM_WO_GEMV
    with pytest.raises(ValueError, match=r"1\.\.15 rows"):
        trtllm_wo_config(16, 4096, 4096, 4)


def test_bytes_per_weight_include_the_group_scales() -> None:
    r = gpu_rates(H200, DEFAULT_PARAMS)
    n, k = 4096, 4096
    for bits, group, per_weight in ((4, 128, 0.5 + 2 / 128), (8, 128, 1 + 2 / 128), (4, k, 0.5 + 2 / k)):
        row = gemm_row(1, n, k, "group", bits, group, kernel=MARLIN_GEMM)
        work = wo_tiled_work(row, json.loads(row["config"]), r, MARLIN, DEFAULT_PARAMS.marlin, 0.0)[0].work
        assert work.dram_read_bytes == n * k * per_weight + k * 2   # + the fp16 activations


def test_time_is_monotone_in_m_n_k_and_w8_is_slower_at_m1() -> None:
    for kernel in (MARLIN_GEMM, MACHETE_GEMM, TRTLLM_FPAINTB, TURBOMIND_GEMM):
        m0 = 5 if kernel == TRTLLM_FPAINTB else 1
        ms = [_time(kernel, m, 8192, 8192) for m in (m0, 64, 512, 4096)]
        assert ms == sorted(ms), (kernel, ms)
        # from N = 4096 up (at N = 1024 a column is split over more CTAs, whose serial fix-ups
        # can cost more than the smaller weight saves: test_a_split_tile_finishes_...)
        ns = [_time(kernel, 16 if m0 == 5 else 1, n, 8192) for n in (4096, 16384, 65536)]
        assert ns == sorted(ns), (kernel, ns)
        ks = [_time(kernel, 16 if m0 == 5 else 1, 8192, k) for k in (1024, 4096, 16384)]
        assert ks == sorted(ks), (kernel, ks)
    for kernel in (MARLIN_GEMM, MACHETE_GEMM):
        assert _time(kernel, 1, 16384, 16384, bits=8) > _time(kernel, 1, 16384, 16384, bits=4)


def test_wo_kernels_refuse_16_bit_weights() -> None:
    with pytest.raises(MpsimInputError, match="int4/int8 weight-only"):
        gemm_row(16, 4096, 4096, "fp16", 16, kernel=MARLIN_GEMM)


def test_fpaintb_before_hopper_is_cutlass2_split_k() -> None:
    cands = fpaintb_candidates(16, 4096, 3 * 1024, 4, 142, "ampere")
    # K = 3072: splits s with K % s == 0 and (K / s) % 64 == 0 -> 1, 2, 3, 4, 6 (5 and 7 do not divide)
    assert sorted({c.split_k for c in cands}) == [1, 2, 3, 4, 6]
    assert {(c.block_m, c.block_n) for c in cands} == set(FPAINTB_SM80_TILES)
    assert all(c.num_warps == 4 and dict(c.extra)["sm80"] == 1 for c in cands)
    l40s = load_hardware("l40s")
    assert all(dict(c.extra).get("sm80") == 1 for c in
               gemm_candidate_configs(16, 4096, 4096, "int4-group", 4, 4096, l40s, TRTLLM_FPAINTB))
    assert not any(dict(c.extra).get("sm80") for c in
                   gemm_candidate_configs(16, 4096, 4096, "int4-group", 4, 4096, H200, TRTLLM_FPAINTB))


def test_op_prices_each_weight_only_kernel_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from mpsim.cli import main

    for kernel in WO_GEMM_KERNELS:
        assert main(["op", "gemm", "--m", "16", "--n", "4096", "--k", "4096", "--w-format", "group",
                     "--bits", "4", "--kernel", kernel, "--hw", "h200-sxm"]) == 0
        assert capsys.readouterr().out.startswith(f"{kernel} on h200-sxm")


def test_the_tile_heuristic_takes_the_largest_token_tile_when_none_holds_m() -> None:
    """A prefill (M above every token tile) runs the largest token tile, not the smallest: each token
    tile re-reads the weights (with the smallest, 2048 x 14336 x 4096 int4 priced 6.4x cuBLAS)."""
    from mpsim.library.wo_tiled import wave_pick

    cands = fpaintb_candidates(2048, 14336, 4096, 4)
    assert wave_pick(cands, 2048, 132).block_m == max(c.block_m or 0 for c in cands) == 256
    assert wave_pick(cands, 24, 132).block_m == 32  # the smallest that holds M, as before
    big = gemm_row(2048, 14336, 4096, "group", 4, 128, kernel=TRTLLM_FPAINTB)
    cublas = gemm_row(2048, 14336, 4096, kernel="cublas_gemm")
    hw = load_hardware("h200-sxm")
    ratio = price_launch(big, hw)["time_s"] / price_launch(cublas, hw)["time_s"]
    assert 0.8 < ratio < 1.5


def test_a_split_tile_finishes_one_turnstile_step_per_peer() -> None:
    # CUTLASS's stream-K reduces a tile's partials in K order (Deterministic mode, wait_eq on the
    # tile's lock), CUTLASS 2's serial split-K by a semaphore: (peers - 1) steps after the main loops
    assert split_peers(SCHED_DP, 8, 128, 1, 132) == 1
    assert split_peers(SCHED_SPLIT_K, 8, 128, 4, 132) == 4
    # 8 tiles x 128 trips: min(132, 8 * 128 / 8) = 128 stream-K units, 16 on each tile
    assert split_peers(SCHED_STREAM_K, 8, 128, 1, 132) == 16
    r = gpu_rates(H200, DEFAULT_PARAMS)
    loop = WoLoop(tile_ns=1000.0, fixup_ns=500.0)
    latency = []
    for k in (2048, 8192):   # 32 and 128 trips: 4 and 16 peers on each of the 8 tiles
        cfg = fpaintb_config(16, 1024, k, 4, 16, 128, 132)
        row = gemm_row(16, 1024, k, "group", 4, k, kernel=TRTLLM_FPAINTB, config=cfg)
        work = wo_tiled_work(row, json.loads(row["config"]), r, FPAINTB, loop, 0.0)[0].work
        latency.append(work.epilogue.latency_ns)
    assert latency == [1000.0 + 3 * 500.0, 1000.0 + 15 * 500.0]
