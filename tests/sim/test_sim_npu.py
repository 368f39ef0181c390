"""NPU step model: decode streams at the bandwidth bound, prefill at the padded array peak, units bind
when they should, steps overlap and stay additive, steps are memoized by signature."""

from __future__ import annotations

import dataclasses
import itertools
from functools import cache

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsim.analysis.bench.npu import (
    DECODE,
    POLICIES,
    decode_bars,
    prefill_bar,
    stream_bytes,
    trace_of,
)
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import NpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.npu.fusion import fuse
from mpsim.sim.npu.rates import npu_rates
from mpsim.sim.npu.replay import step_bounds
from mpsim.sim.replay import simulate_launch
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.workload import Workload

NPUS = ("npu-llm", "npu-edge")
SPECS: dict[str, NpuSpec] = {n: load_hardware(n) for n in NPUS}  # type: ignore[misc]
REL = 1e-9
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def _bars(hw_name: str) -> pd.DataFrame:
    return decode_bars(hw_name).set_index("policy")


@pytest.mark.parametrize("hw_name", NPUS)
@pytest.mark.parametrize("policy", POLICIES)
def test_decode_streams_weights_and_kv_at_the_achievable_bandwidth(hw_name: str, policy: str) -> None:
    # vicuna-7b, prompt 256, 32 new tokens, batch 1 (the bar): within 10% of (weight + KV
    # bytes) / achievable bandwidth, within 3% of that plus the listed costs (docs/npu.md).
    bar = _bars(hw_name).loc[policy]
    assert 1.0 <= bar["vs_bound"] < 1.10
    assert bar["vs_bound_plus_costs"] == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize(("progressive", "high", "low", "first"),
                         [("ap4-4@8-3", "ap4", "ap3", 8), ("ap3-3@4-2", "ap3", "ap2", 4)])
def test_progressive_decode_is_its_two_precisions_in_proportion_to_their_steps(
        progressive: str, high: str, low: str, first: int) -> None:
    hw, memo = SPECS["npu-llm"], LaunchMemo(None)
    t = {p: simulate(trace_of(p, DECODE), hw, memo=memo).summary.tpot_mean_s
         for p in (progressive, high, low)}
    steps = DECODE.gen_len - 1
    expect = (first * t[high] + (steps - first) * t[low]) / steps
    assert t[low] < t[progressive] < t[high]
    assert t[progressive] == pytest.approx(expect, rel=0.01)


def test_prefill_is_compute_bound_at_the_padded_array_peak() -> None:
    bar = prefill_bar("npu-llm")
    assert bar["matrix_bound_share"] > 0.9
    assert 1.0 <= bar["vs_bound"] < 1.15


def test_stream_bytes_are_the_policy_bytes() -> None:
    w16, kv16 = stream_bytes(trace_of("fp16", DECODE).rows)
    w4, kv4 = stream_bytes(trace_of("w4", DECODE).rows)
    assert 3.5 < w16 / w4 < 3.9 and kv16 == kv4  # 4.25 bits/weight; lm_head stays fp16


def test_time_shares_are_additive_and_busy_intervals_overlap() -> None:
    tr = trace_of("w4", Workload(64, 4, 1))
    out = simulate(tr, SPECS["npu-llm"], cache_dir=None).launches
    assert np.allclose(out["end_s"] - out["start_s"], out["time_s"])
    assert (out["start_s"].to_numpy()[1:] == out["end_s"].to_numpy()[:-1]).all()
    assert (out["time_s"] >= 0).all() and (out["kernel_s"] >= -REL).all()
    assert np.allclose(out["time_s"], out["kernel_s"] + out["overhead_s"])
    assert (out["busy_start_s"] <= out["busy_end_s"]).all()
    gemm = (tr.rows["op"] == "gemm") & (tr.rows["phase"] == "decode")
    # A decode GEMM's weights stream in before the previous launch ends (DMA run-ahead).
    assert (out.loc[gemm, "busy_start_s"] < out.loc[gemm, "start_s"]).mean() > 0.9
    starts, ends = step_bounds(tr.rows)
    for a, b in zip(starts, ends, strict=True):  # a step's shares sum to its wall time
        assert out["time_s"].iloc[a:b].sum() == pytest.approx(out["end_s"].iloc[b - 1]
                                                             - out["start_s"].iloc[a])


@pytest.mark.parametrize("hw_name", NPUS)
@pytest.mark.parametrize("policy", ["fp16", "w2", "ap4-3+kv4"])
def test_steps_never_beat_their_bytes_or_flops_and_busy_intervals_their_own_bytes(
        hw_name: str, policy: str) -> None:
    hw = SPECS[hw_name]
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy(policy), Workload(128, 4, 1))
    out = simulate(tr, hw, cache_dir=None).launches
    rows = tr.rows
    peak_bw, peak = hw.dram_bandwidth_Bps(), hw.matrix_peak_flops("fp16")
    matrix = rows["op"].isin(["gemm", "attention"])
    starts, ends = step_bounds(rows)
    for a, b in zip(starts, ends, strict=True):
        step = slice(a, b)
        t = out["time_s"].iloc[step].sum()
        assert t >= out["bytes_dram"].iloc[step].sum() / peak_bw
        assert t >= rows["flops"].iloc[step][matrix.iloc[step]].sum() / peak
    busy = out["busy_end_s"] - out["busy_start_s"]
    own = out["bound"] != "fused"
    assert (busy[own] >= out.loc[own, "bytes_dram"] / peak_bw * (1 - REL)).all()


def test_fusion_folds_elementwise_ops_into_their_neighbours() -> None:
    ops = ["embed", "norm", "gemm", "rope", "kv_quant", "attention", "gemm", "other", "norm",
           "gemm", "act", "gemm", "other", "norm", "gemm", "sample"]
    owner = fuse(ops, True)
    assert owner[1] == 2 and owner[3] == 2 and owner[7] == 6 and owner[8] == 9 and owner[10] == 9
    assert owner[12] == 11 and owner[13] == 14
    assert [owner[i] for i in (0, 4, 15)] == [0, 4, 15]
    assert fuse(ops, False) == list(range(len(ops)))


def test_fusion_off_pays_dispatches_and_activation_traffic() -> None:
    hw = SPECS["npu-llm"]
    off = dataclasses.replace(hw, compiler=dataclasses.replace(hw.compiler, fusion=False))
    tr = trace_of("w2", Workload(64, 3, 1))
    on_res, off_res = simulate(tr, hw, cache_dir=None), simulate(tr, off, cache_dir=None)
    assert off_res.summary.tpot_mean_s > on_res.summary.tpot_mean_s
    assert "fused" in set(on_res.launches["bound"]) and "fused" not in set(off_res.launches["bound"])
    fused = (on_res.launches["bound"] == "fused").to_numpy()
    assert set(tr.rows.loc[fused, "op"]) == {"norm", "rope", "act", "other"}
    # A fused operator takes no time of its own (a prologue carries its host's dispatch wait).
    la = on_res.launches[fused]
    assert np.allclose(la["kernel_s"], 0.0, atol=1e-12)


def test_steps_are_memoized_by_signature(tmp_path: pd.DataFrame) -> None:
    tr = trace_of("ap4-4@3-3", Workload(60, 12, 1))  # kv 61..71: two KV buckets, two precisions
    hw = SPECS["npu-llm"]
    cold = simulate(tr, hw, cache_dir=tmp_path)
    starts, _ = step_bounds(tr.rows)
    assert 1 < cold.stats["simulated"] < len(starts)  # prefill + a few distinct decode steps
    warm = simulate(tr, hw, cache_dir=tmp_path)
    assert warm.stats["simulated"] == 0 and warm.stats["memo_hits"] == cold.stats["simulated"]
    pd.testing.assert_frame_equal(cold.launches, warm.launches)


# ------------------------------------------------------------- units that limit (one launch alone)
def _gemv(hw: NpuSpec, fmt: str = "group", bits: int = 2) -> float:
    return simulate_launch(gemm_row(1, 11008, 4096, fmt, bits), hw).kernel_s


def test_without_a_gemv_path_the_array_load_rate_bounds_low_bit_gemv() -> None:
    hw = SPECS["npu-llm"]
    array_only = dataclasses.replace(hw, gemv=None)
    out = simulate_launch(gemm_row(1, 11008, 4096, "group", 2), array_only)
    assert out.bound == "mac"
    r = npu_rates(hw)
    assert out.kernel_s == pytest.approx(r.array_cycles(1, 11008 / 8, 4096) / r.clock_hz, rel=0.15)
    assert simulate_launch(gemm_row(1, 11008, 4096, "group", 2), hw).bound == "dram"
    # The array's GEMV rate (rows x cols per pass of >= 64 cycles) is load-bound, not M-bound:
    assert r.array_cycles(1, 128, 128) == r.array_cycles(64, 128, 128) < r.array_cycles(256, 128, 128)


@pytest.mark.parametrize("fmt", ["group", "anyprec"])
def test_a_slow_decoder_bounds_and_scales_with_its_rate(fmt: str) -> None:
    hw = SPECS["npu-llm"]
    slow_rates = {b: 16.0 for b in hw.weight_decoder.weights_per_cycle}
    field = "weights_per_cycle" if fmt == "group" else "anyprec_weights_per_cycle"
    slow = dataclasses.replace(hw, weight_decoder=dataclasses.replace(
        hw.weight_decoder, **{field: slow_rates}))
    row = gemm_row(1, 4096, 4096, fmt, 3)
    out = simulate_launch(row, slow)
    assert out.bound == "decoder"
    assert out.kernel_s == pytest.approx(4096 * 4096 / 8 / 16.0 / 1e9, rel=0.1)
    assert simulate_launch(row, hw).bound == "dram"
    other = "anyprec" if fmt == "group" else "group"  # the other format's table is untouched
    assert simulate_launch(gemm_row(1, 4096, 4096, other, 3), slow).bound == "dram"


def test_sram_bandwidth_binds_when_starved() -> None:
    hw = SPECS["npu-llm"]
    s = hw.sram
    starved = dataclasses.replace(hw, sram=dataclasses.replace(
        s, weight_buffer=dataclasses.replace(s.weight_buffer, bandwidth_GBps=20.0)))
    assert simulate_launch(gemm_row(1, 11008, 4096), starved).bound == "sram"


def test_decoder_rate_for_an_unlisted_width_is_the_next_wider_one() -> None:
    r = npu_rates(SPECS["npu-llm"])
    assert r.decode_rate(5) == r.decode_rate(8) == 512
    assert r.decode_rate(5, "anyprec") == 819 and r.decode_rate(3, "anyprec") == 1024
    with pytest.raises(ValueError, match="none handles 17-bit"):
        r.decode_rate(17)


@FAST
@given(st.sampled_from(NPUS), st.sampled_from([1, 4, 16]), st.sampled_from([1024, 4096, 32000]),
       st.sampled_from([2048, 4096, 11008]))
def test_fewer_bits_never_slower_for_a_memory_bound_gemv(hw_name: str, m: int, n: int, k: int) -> None:
    hw = SPECS[hw_name]
    outs = [simulate_launch(gemm_row(m, n, k, "anyprec", b), hw) for b in range(8, 1, -1)]
    for wide, narrow in itertools.pairwise(outs):
        if wide.bound == narrow.bound == "dram":
            assert narrow.time_s <= wide.time_s * (1 + REL)


@pytest.mark.parametrize("hw_name", NPUS)
def test_a_decode_gemv_is_dram_bound_at_every_width_and_faster_with_fewer_bits(hw_name: str) -> None:
    hw = SPECS[hw_name]
    outs = [simulate_launch(gemm_row(1, 11008, 4096, fmt, b), hw)
            for fmt, b in [("fp16", 16), ("group", 8), ("group", 4), ("group", 3), ("group", 2)]]
    assert [o.bound for o in outs] == ["dram"] * 5
    times = [o.time_s for o in outs]
    assert times == sorted(times, reverse=True) and times[-1] < times[0] / 4


@FAST
@given(st.sampled_from(NPUS), st.sampled_from([1, 64, 512]), st.sampled_from([1024, 4096]),
       st.sampled_from([("fp16", 16), ("group", 4), ("anyprec", 3)]), st.sampled_from([1.5, 3.0]))
def test_npu_never_below_roofline_and_monotone_in_bandwidth_and_clock(
        hw_name: str, m: int, n: int, fmt: tuple[str, int], f: float) -> None:
    hw = SPECS[hw_name]
    row = gemm_row(m, n, 4096, *fmt)
    out = simulate_launch(row, hw)
    lower = float(roofline(pd.DataFrame([row]), hw)["t_lower_s"].iloc[0])
    assert out.time_s >= lower * (1 - REL)
    dram = dataclasses.replace(hw.dram, bandwidth_GBps=hw.dram.bandwidth_GBps * f)
    faster = dataclasses.replace(hw, dram=dram)
    assert simulate_launch(row, faster).time_s <= out.time_s * (1 + REL)
    clock = dataclasses.replace(hw, compute=dataclasses.replace(hw.compute, clock_MHz=hw.clock_MHz * f))
    assert simulate_launch(row, clock).time_s <= out.time_s * (1 + REL)


def test_quantized_kv_streams_fewer_bytes_in_decode_attention() -> None:
    hw = SPECS["npu-llm"]
    times = [simulate_launch(attention_row(1, 1, 4096, 32, 32, 128, bits), hw).time_s for bits in (16, 8, 4)]
    assert times[0] > times[1] > times[2]
