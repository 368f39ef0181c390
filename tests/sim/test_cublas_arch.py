"""cuBLAS per GPU generation (mpsim/library/cublas.py candidates, mpsim/sim/gpu/library/cublas.py
work) and the L2 residency of weights a measurement replays (mpsim/sim/gpu/memory.py replay_hits,
analysis/validation/weight_copies.py)."""

from __future__ import annotations

import json

import pytest

from mpsim.analysis.validation.weight_copies import weight_copies
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import gemm_row
from mpsim.library import cublas
from mpsim.sim.best_config import best_gemm_row, gemm_candidate_configs
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.library.cublas import cublas_work, sm80_warp_grid
from mpsim.sim.gpu.memory import replay_hits
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS

L40S: GpuSpec = load_hardware("l40s")  # type: ignore[assignment]
H200: GpuSpec = load_hardware("h200-sxm")  # type: ignore[assignment]
B200: GpuSpec = load_hardware("b200-sxm")  # type: ignore[assignment]


def _cfgs(hw: GpuSpec, m: int, n: int, k: int) -> list[dict[str, int]]:
    return [c.config_dict() for c in gemm_candidate_configs(m, n, k, "fp16", 16, None, hw,
                                                            cublas.CUBLAS_GEMM)]


def test_ada_runs_sm80_tiles_with_split_k_and_no_stream_k() -> None:
    cfgs = _cfgs(L40S, 16, 4096, 4096)
    assert {c["sm"] for c in cfgs} == {80}
    assert not any(c["stream_k"] for c in cfgs)
    assert max(c["split_k"] for c in cfgs) > 1  # 16-64 tiles on 142 SMs: split within half of them
    tiles = {(c["block_n"], c["block_m"], c["block_k"], c["num_stages"]) for c in cfgs}
    # 256x128x64 at 3 stages needs 144 KiB: above Ada's 99 KiB per CTA; the 32-deep one fits
    assert (256, 128, 64, 3) not in tiles and (256, 128, 32, 3) in tiles
    assert {c["block_m"] for c in cfgs} <= {64, 128, 256}


def test_ada_cublas_splits_k_only_from_2_to_the_21_macs_within_half_the_sms() -> None:
    """cuBLAS's Ada heuristic (L40S rows: M 8, N 64 takes 16.4 us at K 3584, unsplit, and 4.0 us
    at K 4096 = 2^21 / (8 x 64), split)."""
    assert {c["split_k"] for c in _cfgs(L40S, 8, 64, 3584)} == {1}
    assert max(c["split_k"] for c in _cfgs(L40S, 8, 64, 4096)) == 16
    assert max(c["split_k"] for c in _cfgs(L40S, 1, 64, 3584)) > 1  # M = 1: its GEMV kernels
    # from K = 10240 at any M N K (M 2, N 32: 35.1 us at K 8192, unsplit; 5.3 at K 10240)
    assert {c["split_k"] for c in _cfgs(L40S, 2, 32, 8192)} == {1}
    assert max(c["split_k"] for c in _cfgs(L40S, 2, 32, 10240)) > 1
    for m, n, k in ((8, 1024, 4096), (32, 2048, 2048), (1, 4096, 4096)):
        cands = gemm_candidate_configs(m, n, k, "fp16", 16, None, L40S, cublas.CUBLAS_GEMM)
        assert max(c.split_k for c in cands) > 1
        assert all(c.grid[0] <= L40S.compute_units // 2 for c in cands if c.split_k > 1)
    unsplit = best_gemm_row(8, 64, 3584, hw=L40S, kernel=cublas.CUBLAS_GEMM).predicted_s
    split = best_gemm_row(8, 64, 4096, hw=L40S, kernel=cublas.CUBLAS_GEMM).predicted_s
    assert unsplit > 2.5 * split  # measured 16.4 vs 4.0 us
    # Hopper's candidates are not gated: split-K at the small shape
    assert max(c.split_k for c in cublas.cublas_candidates(8, 64, 3584, H200.compute_units)) > 1


def test_split_k_stops_when_the_tiles_fill_the_chip() -> None:
    cfgs = _cfgs(L40S, 8192, 8192, 8192)  # 64 x 64 tiles of 128x128 >> 2 x 142 SMs
    assert all(c["split_k"] == 1 for c in cfgs if (c["block_m"], c["block_n"]) == (128, 128))


def test_hopper_keeps_its_wgmma_stream_k_set_and_blackwell_adds_cta_pairs() -> None:
    hopper = _cfgs(H200, 512, 4096, 4096)
    assert "sm" not in hopper[0] and {c["stream_k"] for c in hopper} == {0, 1}
    assert len(hopper) == len(cublas.cublas_candidates(512, 4096, 4096, H200.compute_units))
    bw = _cfgs(B200, 512, 4096, 4096)
    assert {c["sm"] for c in bw} == {100} and {c["pair"] for c in bw} == {0, 1}
    assert {c["stream_k"] for c in bw} == {0, 1}


def test_sm80_warp_grids_follow_cutlass() -> None:
    assert sm80_warp_grid(256, 128, 8) == (4, 2)
    assert sm80_warp_grid(128, 256, 8) == (2, 4)
    assert sm80_warp_grid(256, 64, 4) == (4, 1)
    assert sm80_warp_grid(64, 256, 4) == (1, 4)
    assert sm80_warp_grid(128, 128, 4) == (2, 2)


def test_ada_pads_tokens_to_the_cta_tile_hopper_to_the_wgmma_granule() -> None:
    r_l, r_h = gpu_rates(L40S, DEFAULT_PARAMS), gpu_rates(H200, DEFAULT_PARAMS)
    sm80 = cublas.cublas_config(130, 4096, 4096, 128, 128, False, 142, sm=80, block_k=32, stages=3,
                                warps=4)
    row = gemm_row(130, 4096, 4096, kernel=cublas.CUBLAS_GEMM, config=sm80, sms=142)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r_l, DEFAULT_PARAMS, 0.0)
    assert w[0].work.trip.mma_flops == 2.0 * 128 * 128 * 32  # 2 token tiles of 128, each full
    assert w[0].work.total_ctas == 2 * 32
    sm90 = cublas.cublas_config(130, 4096, 4096, 128, 128, False, 132)
    row = gemm_row(130, 4096, 4096, kernel=cublas.CUBLAS_GEMM, config=sm90, sms=132)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r_h, DEFAULT_PARAMS, 0.0)
    assert w[0].work.trip.mma_flops == 2.0 * 72 * 128 * 64  # 130 split in two: 65 -> 72 (granule 8)


def test_split_k_slices_the_k_loop_and_reduces_in_l2() -> None:
    r = gpu_rates(L40S, DEFAULT_PARAMS)
    cfg = cublas.cublas_config(16, 4096, 4096, 64, 64, False, 142, sm=80, block_k=32, stages=10,
                               warps=4, split_k=4)
    row = gemm_row(16, 4096, 4096, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=142)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r, DEFAULT_PARAMS, 0.0)[0].work
    assert w.total_ctas == 64 * 4 and w.iters_by_class == (4096 // 32 // 4,)
    assert w.epilogue.sync and w.epilogue.ws_bytes == 2.0 * 64 * 64 * 4


def test_blackwell_pair_loads_half_the_tokens() -> None:
    r = gpu_rates(B200, DEFAULT_PARAMS)
    cfg = cublas.cublas_config(256, 8192, 4096, 256, 128, False, 148, sm=100, block_k=64, pair=True)
    row = gemm_row(256, 8192, 4096, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=148)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r, DEFAULT_PARAMS, 0.0)[0].work
    assert w.trip.load_bytes == (128 + 128) * 64 * 2
    assert w.trip.mma_flops == 2.0 * 256 * 128 * 64


def _stream_k_epilogue(m: int, n: int, k: int, tt: int, wt: int) -> tuple[float, float, float]:
    """(workspace bytes, latency ns after the loop, tile epilogues' ns inside a CTA's loop) of one
    Hopper stream-K config."""
    r = gpu_rates(H200, DEFAULT_PARAMS)
    cfg = cublas.cublas_config(m, n, k, tt, wt, True, 132)
    row = gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=132)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r, DEFAULT_PARAMS,
                    0.0)[0].work
    inline = w.trip.overhead_cycles * w.iters_by_class[0] / r.clock_hz * 1e9
    return w.epilogue.ws_bytes, w.epilogue.latency_ns, inline


def test_stream_k_fixup_only_where_a_tile_is_split() -> None:
    c = DEFAULT_PARAMS.cublas
    # one K trip per tile (k = 64): 8 x 64 = 512 units on 132 CTAs, uneven, but no tile can split
    # (Hopper runs each of a CTA's up to 4 tiles' epilogues inside its loop)
    ws, lat, inline = _stream_k_epilogue(128, 4096, 64, 16, 64)
    assert ws == 0.0 and lat == 0.0 and inline == pytest.approx(4 * c.tile_ns)
    # 264 tiles of 2 trips on 132 CTAs: 4 trips each, two whole tiles per CTA
    ws, lat, inline = _stream_k_epilogue(16, 264 * 64, 128, 16, 64)
    assert ws == 0.0 and lat == 0.0 and inline == pytest.approx(2 * c.tile_ns)
    # 16 tiles of 64 trips on 132 CTAs: 8 trips each, every tile shared by 8 CTAs, whose
    # partials are added in turn: 7 fix-ups after the main loops
    ws, lat, inline = _stream_k_epilogue(16, 1024, 4096, 16, 64)
    assert ws == 2.0 * 16 * 64 * 4 and lat == pytest.approx(7 * c.sk_fixup_us * 1e3)
    assert inline == pytest.approx(c.tile_ns)
    # 264 tiles of 64 trips: 128 trips a CTA, a tile at most shared by two: one fix-up
    ws, lat, inline = _stream_k_epilogue(16, 264 * 64 + 64, 4096, 16, 64)
    assert lat == pytest.approx(c.sk_fixup_us * 1e3) and inline == pytest.approx(3 * c.tile_ns)


def test_stream_k_tiles_store_their_valid_rows_inside_the_loop() -> None:
    """A persistent CTA's tiles store as its loop goes: per trip its tiles' valid output rows
    (M 100 of a 104-row wgmma tile), through the port, none after the loop."""
    r = gpu_rates(H200, DEFAULT_PARAMS)
    m, n, k = 100, 132 * 2 * 64, 128
    cfg = cublas.cublas_config(m, n, k, 104, 64, True, 132)
    row = gemm_row(m, n, k, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=132)
    w = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r, DEFAULT_PARAMS,
                    0.0)[0].work
    per = w.iters_by_class[0]
    assert w.epilogue.write_bytes == 0.0
    assert w.trip.store_bytes * per == pytest.approx(2 * m * 64 * 2)   # two tiles a CTA
    assert w.written_bytes == m * n * 2


def test_hopper_split_k_adds_cublas_reduce_kernel() -> None:
    r = gpu_rates(H200, DEFAULT_PARAMS)
    cands = cublas.cublas_candidates(8, 256, 4096, 132)
    splits = sorted({c.split_k for c in cands if c.block_n == 64 and c.block_m == 16})
    # 4 tiles of 64 rows: slices while the grid stays within a wave and every slice has 2 trips
    assert splits == [1, 2, 4, 8, 16, 32]
    cfg = next(c for c in cands if c.split_k == 8 and c.block_n == 64 and c.block_m == 16)
    row = gemm_row(8, 256, 4096, kernel=cublas.CUBLAS_GEMM, config=cfg, sms=132)
    gemm, reduce = cublas_work(row, json.loads(row["config"]), json.loads(row["grid"]), r,
                               DEFAULT_PARAMS, 0.0)
    assert gemm.work.total_ctas == 32 and gemm.work.iters_by_class == (8,)
    # an fp32 partial per slice, of the 8 token rows used (M rounded to wgmma's 8) x 64
    assert gemm.work.epilogue.write_bytes == 8 * 64 * 4
    assert reduce.work.dram_read_bytes == 0.0                       # partials read back from L2
    assert reduce.work.trip.load_bytes * reduce.work.total_ctas == 8 * 256 * 4 * 8
    assert launch_kernels(row) == 2
    assert launch_kernels(gemm_row(8, 256, 4096, kernel=cublas.CUBLAS_GEMM, sms=132)) == 1


def test_hopper_heuristic_keeps_stream_k_only_where_tiles_fill_half_a_wave() -> None:
    big = cublas.cublas_heuristic(2048, 6144, 4096, 132)
    assert big.config_dict().get("stream_k") == 1 and big.block_n == 256
    decode = cublas.cublas_heuristic(8, 4096, 4096, 132)     # 16 tiles of 256 rows: DP instead
    assert decode.config_dict().get("stream_k") == 0 and (decode.block_m, decode.block_n) == (16, 64)


def test_best_cublas_config_on_each_generation() -> None:
    assert json.loads(best_gemm_row(4096, 4096, 4096, hw=L40S, kernel=cublas.CUBLAS_GEMM)
                      .row["config"])["sm"] == 80
    assert json.loads(best_gemm_row(4096, 4096, 4096, hw=B200, kernel=cublas.CUBLAS_GEMM)
                      .row["config"])["sm"] == 100
    with pytest.raises(ValueError, match="generation"):
        cublas.cublas_candidates(16, 64, 64, 132, "volta")


def test_replay_hits_by_hand() -> None:
    r = gpu_rates(L40S, DEFAULT_PARAMS)
    l2 = 96 * 2**20                                      # 100,663,296 B
    full, none = l2 * DEFAULT_PARAMS.replay_l2_from, l2 * DEFAULT_PARAMS.replay_l2_to
    assert (full, none) == (l2 * 0.95, l2 * 1.06)        # 95.6 MB, 106.7 MB
    x = y = 0.5e6
    assert replay_hits(0, 1e9, x, y, r, DEFAULT_PARAMS) == (0.0, 0.0, 0.0)
    # five 18 MB copies cycle 91 MB: all of it stays, and the input and output too
    assert replay_hits(5, 18e6, x, y, r, DEFAULT_PARAMS) == (18e6, x, y)
    # two 50,331,648 B copies (TRT-LLM 1.3's ceil(L2 / weights) for a 48 MiB weight) cycle the
    # L2's size plus 1 MB: between the edges, a linear share
    w, x_hit, y_kept = replay_hits(2, 50_331_648.0, x, y, r, DEFAULT_PARAMS)
    assert w == pytest.approx(50_331_648.0 * (none - (l2 + 1e6)) / (none - full), rel=1e-12)
    assert 0.4 < w / 50_331_648.0 < 0.5 and (x_hit, y_kept) == (x, y)
    # one 110 MB weight and five 22 MB copies: beyond the edge, nothing of the weights stays
    assert replay_hits(1, 110e6, x, y, r, DEFAULT_PARAMS)[:2] == (0.0, 0.0)
    assert replay_hits(5, 22e6, x, y, r, DEFAULT_PARAMS) == (0.0, x, y)
    # the output has its own edges (written lines: all of it up to 0.70 of the L2, none from 1.40):
    # after a 110 MB weight, 111 MB between its uses keeps a linear share
    out_from, out_to = l2 * DEFAULT_PARAMS.replay_out_from, l2 * DEFAULT_PARAMS.replay_out_to
    assert (out_from, out_to) == (l2 * 0.70, l2 * 1.40)
    y_kept = replay_hits(1, 110e6, x, y, r, DEFAULT_PARAMS)[2]
    assert y_kept == pytest.approx(y * (out_to - 111e6) / (out_to - out_from), rel=1e-12)
    assert replay_hits(1, 30e6, x, 30e6, r, DEFAULT_PARAMS)[2] == 30e6     # 60.5 MB: below 0.70
    assert replay_hits(1, 10e6, x, 150e6, r, DEFAULT_PARAMS)[2] == 0.0     # 160.5 MB: beyond
    # GH100's two partitions (h200-sxm l2.partitions 2): two copies cycling exactly its 60 MiB are
    # not found (the H200 rows), and misses begin at the usable share
    h = gpu_rates(H200, DEFAULT_PARAMS)
    assert h.l2_partitions == 2 and r.l2_partitions == 1
    assert replay_hits(2, 30 * 2**20, x, y, h, DEFAULT_PARAMS)[0] == 0.0
    usable = 60 * 2**20 * DEFAULT_PARAMS.l2_usable_fraction
    assert replay_hits(4, usable / 4 - 1e6, x, y, h, DEFAULT_PARAMS)[0] == usable / 4 - 1e6
    # a partitioned L2 keeps no output: the published write rates show no L2 edge (SimParams)
    assert replay_hits(4, 1e6, x, 8e6, h, DEFAULT_PARAMS) == (1e6, x, 0.0)


def test_weight_copies_per_collector() -> None:
    l2, dram = 96 * 2**20, 48e9
    assert weight_copies("trtllm", "1.0.0", "bfloat16", 8, 4096, 4096, l2, dram) == 5
    assert weight_copies("trtllm", "1.3.0rc20", "bfloat16", 8, 4096, 4096, l2, dram) == 3  # 33.5 MB
    assert weight_copies("trtllm", "1.3.0rc20", "bfloat16", 8, 65536, 8192, l2, dram) == 1
    assert weight_copies("trtllm", "1.3.0rc20", "bfloat16", 8, 1024, 1024, l2, dram) == 5
    assert weight_copies("vllm", "0.24.0", "bfloat16", 8, 4096, 4096, l2, dram) == 6
    assert weight_copies("vllm", "0.24.0", "fp8_block", 8, 4096, 4096, l2, dram) == 1
    assert weight_copies("sglang", "0.5.14", "bfloat16", 8, 4096, 4096, l2, 141e9) == 6
    assert weight_copies("vidur", "", "bfloat16", 8, 4096, 4096, l2, dram) == 0


def test_adapter_puts_the_collectors_copies_in_the_cublas_config() -> None:
    from mpsim.analysis.validation.adapter import with_weight_copies
    launch = gemm_row(8, 4096, 4096, kernel=cublas.CUBLAS_GEMM, sms=142)
    measured = {"m": 8, "n": 4096, "k": 4096, "framework": "vllm", "fw_version": "0.24.0"}
    assert json.loads(with_weight_copies(launch, measured, L40S)["config"])["w_copies"] == 6
    other = {**measured, "framework": "", "fw_version": ""}
    assert with_weight_copies(launch, other, L40S) is launch


@pytest.mark.parametrize(("hw_name", "arch", "sm"), [("l40s", "ada", 80), ("a100-sxm-80gb", "ampere", 80),
                                                     ("b200-sxm", "blackwell", 100),
                                                     ("h200-sxm", "hopper", None)])
def test_synthesized_cublas_rows_use_the_devices_instruction_family(hw_name: str, arch: str,
                                                                     sm: int | None) -> None:
    """`synth --engine vllm --hw X` (no autotune): cuBLAS's fixed choice is the one of X's
    generation (its rows carry `sm`), not Hopper's stream-K tiles on every GPU."""
    from mpsim.engines import engine_target, model_heads
    from mpsim.engines.rows import as_engine
    from mpsim.models import get_model
    from mpsim.policy import parse_policy

    hw: GpuSpec = load_hardware(hw_name)  # type: ignore[assignment]
    spec = get_model("llama-3-8b")
    target = engine_target("vllm", parse_policy("fp16"), model_heads(spec.as_dict()), arch=arch,
                           sms=hw.compute_units)
    assert target is not None
    for m in (1, 16, 200, 2048):
        row = as_engine(gemm_row(m, 4096, 4096, "fp16", 16, None, False), target)
        assert row is not None and row["kernel"] == cublas.CUBLAS_GEMM
        cfg = row["config"] if isinstance(row["config"], dict) else json.loads(row["config"])
        assert cfg.get("sm") == sm
        if sm == 80:  # data-parallel tiles within the device's shared memory, serial split-K
            assert not cfg["stream_k"]
            stage = (cfg["block_m"] + cfg["block_n"]) * cfg["block_k"] * 2
            assert stage * cfg["num_stages"] <= hw.sm.max_shared_memory_per_cta_KiB * 1024
            grid = row["grid"][0] if isinstance(row["grid"], list) else json.loads(row["grid"])[0]
            assert grid >= min(hw.compute_units // 2, 4096 // cfg["block_n"])  # not a 32-CTA grid


def test_heuristic_refuses_an_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="unknown architecture 'volta'"):
        cublas.heuristic_for_arch(1, 4096, 4096, 108, "volta")
