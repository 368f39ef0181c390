"""NPU model: bit widths change DMA bytes and decoder time; PMPD-style decode speedups."""

from __future__ import annotations

import dataclasses
import itertools

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import NpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.npu.rates import npu_rates
from mpsim.sim.replay import simulate_launch
from mpsim.sim.result import SimResult
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.workload import Workload

NPUS = ("npu-llm", "npu-edge")
SPECS: dict[str, NpuSpec] = {n: load_hardware(n) for n in NPUS}  # type: ignore[misc]
REL = 1e-9
WORKLOAD = Workload(512, 17, 1)  # 16 decode steps
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode(policy: str, hw: NpuSpec) -> tuple[SimResult, pd.DataFrame]:
    tr = synthesize(PRESETS["vicuna-7b"], parse_policy(policy), WORKLOAD)
    return simulate(tr, hw, cache_dir=None), tr.rows


def _decode_bytes(rows: pd.DataFrame, mask: pd.Series) -> float:
    sel = mask & (rows["phase"] == "decode")
    return float((rows["bytes_read"] + rows["bytes_written"])[sel].sum())


def test_uniform_3_bit_decode_is_faster_than_fp16_by_what_its_bytes_predict() -> None:
    hw = SPECS["npu-llm"]
    (fp16, rows16), (w3, rows3) = _decode("fp16", hw), _decode("w3", hw)
    gemm16, gemm3 = rows16["op"] == "gemm", rows3["op"] == "gemm"
    dec16, dec3 = rows16["phase"] == "decode", rows3["phase"] == "decode"
    # Weight streaming: decode GEMM time falls with the GEMM bytes, less each launch's fixed
    # dispatch (1 us) and pipeline fill/drain (~1 us), ~10% of a 3-bit GEMM.
    gemm_speedup = (fp16.launches["time_s"][gemm16 & dec16].sum()
                    / w3.launches["time_s"][gemm3 & dec3].sum())
    gemm_bytes = _decode_bytes(rows16, gemm16) / _decode_bytes(rows3, gemm3)
    assert 0.88 * gemm_bytes < gemm_speedup < gemm_bytes
    # Whole step: bytes at the achievable bandwidth plus the dispatch cost of every launch.
    bw = hw.dram_bandwidth_Bps() * hw.achievable_bandwidth_fraction
    launches = int(dec16.sum())
    predict = ((_decode_bytes(rows16, dec16) / bw + launches * hw.launch_overhead_s())
               / (_decode_bytes(rows3, dec3) / bw + launches * hw.launch_overhead_s()))
    speedup = fp16.summary.tpot_mean_s / w3.summary.tpot_mean_s
    assert speedup == pytest.approx(predict, rel=0.12)
    assert 3.0 < speedup < _decode_bytes(rows16, dec16) / _decode_bytes(rows3, dec3)


@pytest.mark.parametrize(("progressive", "high", "low"), [("ap4-4@8-3", "ap4", "ap3"),
                                                         ("ap3-3@4-2", "ap3", "ap2")])
def test_progressive_policies_land_between_their_two_precisions(progressive: str, high: str,
                                                                 low: str) -> None:
    hw = SPECS["npu-llm"]
    t = {p: _decode(p, hw)[0].summary.tpot_mean_s for p in (progressive, high, low)}
    assert t[low] < t[progressive] < t[high]


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


def test_a_slow_decoder_bounds_and_scales_with_its_rate() -> None:
    hw = SPECS["npu-llm"]
    slow = dataclasses.replace(hw, weight_decoder=dataclasses.replace(
        hw.weight_decoder, weights_per_cycle={b: 16.0 for b in hw.weight_decoder.weights_per_cycle}))
    row = gemm_row(1, 4096, 4096, "anyprec", 3)
    out = simulate_launch(row, slow)
    assert out.bound == "decoder"
    decode_s = 4096 * 4096 / hw.compute.cores / 16.0 / (hw.clock_MHz * 1e6)
    assert out.kernel_s == pytest.approx(decode_s, rel=0.1)
    assert simulate_launch(row, hw).bound == "dram"


def test_decoder_rate_for_an_unlisted_width_is_the_next_wider_one() -> None:
    r = npu_rates(SPECS["npu-llm"])
    assert r.decode_rate(5) == r.decode_rate(8) == 512
    assert r.decode_rate(3) == 1024
    with pytest.raises(ValueError, match="none handles 17-bit"):
        r.decode_rate(17)


def test_quantized_kv_streams_fewer_bytes_in_decode_attention() -> None:
    hw = SPECS["npu-llm"]
    times = [simulate_launch(attention_row(1, 1, 4096, 32, 32, 128, bits), hw).time_s for bits in (16, 8, 4)]
    assert times[0] > times[1] > times[2]
