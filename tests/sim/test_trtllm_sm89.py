"""TensorRT-LLM's attention op on Ada (mpsim/library/trtllm_sm89.py): fmha_v2's sm_89 context
kernels by head size and cache, XQA's HMMA kernel over an e4m3 cache, and their work models."""

from __future__ import annotations

import json

import pytest

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row
from mpsim.library.trtllm_attention import TRTLLM_MMHA, TRTLLM_XQA
from mpsim.library.trtllm_sm89 import TRTLLM_SM89_FMHA, fmha_tile
from mpsim.sim.gpu.model import launch_work, simulate_gpu_launch
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS

P = DEFAULT_PARAMS
L40S: GpuSpec = load_hardware("l40s")  # type: ignore[assignment]


@pytest.mark.parametrize(("head_dim", "kv_len", "fp8", "tile"), [
    (32, 4096, False, (64, 64, False)),     # non-tiled: 64 keys a step up to head_dim 32
    (64, 4096, False, (64, 32, False)),     # 32 keys from 40 to 128
    (128, 4096, False, (64, 32, False)),
    (192, 4096, False, (64, 16, False)),    # 16 above 128
    (256, 64, False, (64, 16, False)),      # at most 64 keys: non-tiled whatever the head
    (256, 4096, False, (64, 128, True)),    # sm_8x tiles only head_dim 256
    (64, 4096, True, (128, 128, False)),    # the FP8 FMHA: non-tiled, 128 x 128 up to 64
    (128, 4096, True, (64, 32, False)),
    (256, 4096, True, (64, 32, False)),
])
def test_the_context_kernel_follows_the_runner_rule(head_dim: int, kv_len: int, fp8: bool,
                                                    tile: tuple[int, int, bool]) -> None:
    assert fmha_tile(head_dim, kv_len, fp8) == tile


def _row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
         kv_bits: int = 16, fp8_attention: bool = False) -> dict:
    return attention_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits,
                         kernel="trtllm_sm89", kv_append=True, sms=L40S.compute_units,
                         fp8_attention=fp8_attention)


def test_context_rows_grid_and_flags() -> None:
    row = _row(2, 1000, 1000, 32, 8, 128)
    cfg = json.loads(row["config"])
    assert row["kernel"] == TRTLLM_SM89_FMHA and json.loads(row["grid"]) == [16, 32, 2]
    assert (cfg["block_m"], cfg["block_n"], cfg["fp8"], cfg["tiled"], cfg["sync_loads"]) == (64, 32, 0, 0, 0)
    # an e4m3 cache keeps the bf16 kernel (the append writes e4m3); fp8_attention runs the FP8 FMHA
    assert json.loads(_row(2, 1000, 1000, 32, 8, 128, 8)["config"])["fp8"] == 0
    assert json.loads(_row(2, 1000, 1000, 32, 8, 128, 8, True)["config"])["fp8"] == 1
    # head_dim 256 at most 64 keys: the non-tiled kernel loads without cp.async
    assert json.loads(_row(2, 64, 64, 32, 8, 256)["config"])["sync_loads"] == 1


def test_decode_runs_hmma_over_either_cache_and_one_cta_over_e4m3() -> None:
    bf16 = _row(1, 1, 32768, 16, 2, 128)
    fp8 = _row(1, 1, 32768, 16, 2, 128, 8)
    assert bf16["kernel"] == fp8["kernel"] == TRTLLM_XQA
    assert json.loads(bf16["config"])["gmma"] == json.loads(fp8["config"])["gmma"] == 0
    assert json.loads(bf16["config"])["split_k"] > 1          # the multi-block rule
    assert json.loads(fp8["grid"]) == [1, 2, 1] and json.loads(fp8["config"])["split_k"] == 1
    assert _row(8, 1, 1024, 32, 32, 128)["kernel"] == TRTLLM_MMHA   # vanilla MHA: no XQA


def test_an_e4m3_cache_pays_its_conversion_on_the_hmma_kernel() -> None:
    r = gpu_rates(L40S, P)
    fp8 = launch_work(_row(1, 1, 4096, 16, 2, 128, 8), r, P, 0.0)[-1].work
    bf16 = launch_work(_row(1, 1, 4096, 16, 2, 128), r, P, 0.0)[-1].work
    assert fp8.trip.pipes["cvt"] == pytest.approx(256 * 128 * 2 * P.trtllm.hmma_fp8_cvt)
    assert "cvt" not in bf16.trip.pipes
    # a one-block walk of 4096 keys: 16 tiles, each converting its keys on the conversion pipe
    assert fp8.iters_by_class == (16,) and fp8.total_ctas == 2
    # a short cache converts its live warps' keys only (64 a warp)
    short = launch_work(_row(1, 1, 10, 16, 2, 128, 8), r, P, 0.0)[-1].work
    assert short.trip.pipes["cvt"] == pytest.approx(64 * 128 * 2 * P.trtllm.hmma_fp8_cvt)


def test_the_fp8_fmha_is_faster_at_head_dim_128_and_slower_at_64_and_256() -> None:
    """The L40S rows' ordering (median FP8 / bf16 time 0.58 at head_dim 128, 1.26 at 64, 1.6-1.9 at
    256, long prompts): the 64-row qmma kernels reach a larger share of the doubled rate than the
    128 x 128, and the head_dim-256 builds (limited fragments, no ldgsts) far less."""
    def t(d: int, fp8: bool) -> float:
        return simulate_gpu_launch(_row(4, 4096, 4096, 32, 8, d, 8 if fp8 else 16, fp8), L40S, P).cycles
    assert t(128, True) < 0.8 * t(128, False)
    assert t(64, True) > t(64, False)
    assert t(256, True) > 1.4 * t(256, False)
    assert t(256, True) > 4 * t(128, True)  # measured 6.3x at twice the FLOPs


def test_context_work_counts_the_steps_up_to_the_diagonal() -> None:
    r = gpu_rates(L40S, P)
    parts = launch_work(_row(1, 256, 256, 2, 2, 128), r, P, 0.0)
    prep, fmha = parts[0].work, parts[1].work
    assert prep.name == "trtllm qkv preprocessing" and fmha.name == "trtllm sm89 context fmha"
    # 4 query tiles of 64 over 32-key steps: 2 + 4 + 6 + 8 steps a head; the longest CTA walks 8
    # (40 steps a head over 8 CTAs on 142 SMs: the longest CTA bounds a slot's share)
    assert fmha.total_ctas == 8 and fmha.iters_by_class == (8,)
    assert fmha.trip.mma_flops == 4.0 * 64 * 32 * 128


def test_mmha_over_an_e4m3_cache_on_ada_pays_its_per_cta_cost() -> None:
    r = gpu_rates(L40S, P)
    fp8 = _row(8, 1, 16, 32, 32, 128, 8)
    assert fp8["kernel"] == TRTLLM_MMHA and json.loads(fp8["config"])["sm89_fp8"] == 1
    assert "sm89_fp8" not in json.loads(_row(8, 1, 16, 32, 32, 128)["config"])
    setup = launch_work(fp8, r, P, 0.0)[-1].work.setup_ns
    assert setup == pytest.approx(P.trtllm.mmha_cta_ns + P.trtllm.sm89_mmha_fp8_cta_ns)
    # the Hopper room's MMHA over an e4m3 cache pays none
    hopper = attention_row(8, 1, 16, 32, 32, 128, 8, kernel="trtllm", sms=132)
    assert launch_work(hopper, r, P, 0.0)[-1].work.setup_ns == pytest.approx(P.trtllm.mmha_cta_ns)


def test_xqa_on_ada_runs_mha_cu_s_sm89_build_with_its_own_costs() -> None:
    r = gpu_rates(L40S, P)
    ada = _row(64, 1, 512, 32, 4, 128)
    assert ada["kernel"] == TRTLLM_XQA and json.loads(ada["config"])["sm89"] == 1
    work = launch_work(ada, r, P, 0.0)[-1].work
    head = P.trtllm.xqa_head_ns * 8 * 128 / 128       # the query group's per-head cost
    assert work.setup_ns == pytest.approx(P.trtllm.sm89_hmma_cta_ns + head)
    assert work.trip.latency_ns == P.trtllm.sm89_hmma_trip_ns
    # the Hopper room's HMMA kernel (sm_90 build) keeps the H200-fitted costs
    hopper = attention_row(64, 1, 512, 32, 4, 128, 16, kernel="trtllm", sms=132)
    assert "sm89" not in json.loads(hopper["config"])
    h = launch_work(hopper, r, P, 0.0)[-1].work
    if not json.loads(hopper["config"])["gmma"]:
        assert h.trip.latency_ns == P.trtllm.hmma_trip_ns
        assert h.setup_ns == pytest.approx(P.trtllm.hmma_cta_ns + head)


def test_a_binding_window_on_ada_runs_the_decode_kernels_and_refuses_the_context() -> None:
    from mpsim.errors import MpsimInputError
    from mpsim.library import WINDOWED_LIBRARIES

    assert "trtllm_sm89" in WINDOWED_LIBRARIES
    row = attention_row(64, 1, 4096, 32, 4, 128, 16, kernel="trtllm_sm89", sms=142, window=128)
    assert row["kernel"] == TRTLLM_XQA and json.loads(row["config"])["window"] == 128
    # a covering window is no window
    assert "window" not in json.loads(attention_row(64, 1, 100, 32, 4, 128, 16, kernel="trtllm_sm89",
                                                    sms=142, window=128)["config"])
    with pytest.raises(MpsimInputError, match="sm_89 context FMHA under a sliding window of 128"):
        attention_row(2, 1000, 1000, 32, 8, 128, 16, kernel="trtllm_sm89", sms=142, window=128)


def test_hmma_reads_the_windows_cached_keys_only() -> None:
    """mha.cu's warps past the window issue no load: HMMA's DRAM reads count the window's keys
    (GMMA's TMA moves whole pages from the window's first one)."""
    r = gpu_rates(L40S, P)
    full = launch_work(_row(64, 1, 4096, 32, 4, 128), r, P, 0.0)[-1].work
    win = attention_row(64, 1, 4096, 32, 4, 128, 16, kernel="trtllm_sm89", sms=142, window=128)
    windowed = launch_work(win, r, P, 0.0)[-1].work
    q_out = 64 * 32 * 128 * 2 * 3
    assert full.dram_read_bytes == 64 * 4 * 4096 * 128 * 2 * 2 + q_out
    assert windowed.dram_read_bytes == 64 * 4 * 128 * 128 * 2 * 2 + q_out


def test_a_replayed_kv_cache_follows_the_one_partition_l2s_replay_edges() -> None:
    """A KV cache replayed back to back is found in L2 as `replay_hits` finds a weight: on Ada's
    one-partition L2 up to replay_l2_from of its size, none from replay_l2_to; a partitioned L2
    keeps the usable share's cut."""
    from mpsim.sim.gpu.memory import replayed_kv_bytes, usable_l2

    r = gpu_rates(L40S, P)
    size = r.l2_bytes
    assert replayed_kv_bytes(True, 0.9 * size, r, P) == 0.9 * size      # above 0.75, below 0.95
    assert replayed_kv_bytes(True, 1.1 * size, r, P) == 0.0
    mid = (P.replay_l2_from + P.replay_l2_to) / 2 * size
    assert replayed_kv_bytes(True, mid, r, P) == pytest.approx(mid / 2)
    assert replayed_kv_bytes(False, 0.5 * size, r, P) == 0.0
    h200 = gpu_rates(load_hardware("h200-sxm"), P)  # type: ignore[arg-type]
    cut = usable_l2(h200, P)
    assert replayed_kv_bytes(True, cut, h200, P) == cut
    assert replayed_kv_bytes(True, cut * 1.01, h200, P) == 0.0
