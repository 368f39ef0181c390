"""GPU model invariants: never below the roofline, monotone in bandwidth, clock and bits, L2 helps."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.replay import simulate_launch
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.workload import Workload

GPUS = ("a100-sxm-80gb", "b200-sxm", "h100-sxm", "h200-sxm", "l40s", "rtx-4090")
SPECS: dict[str, GpuSpec] = {n: load_hardware(n) for n in GPUS}  # type: ignore[misc]
CLOCK_SEARCH_REL = 2e-4  # two power-limited clock searches, each stopped within 1e-4 of its fixed point
REL = 1e-9  # float noise of summing cycles in different orders

formats = st.sampled_from([("fp16", 16), ("group", 8), ("group", 4), ("group", 3), ("group", 2),
                           ("anyprec", 8), ("anyprec", 4), ("anyprec", 3), ("anyprec", 2)])
gemm_shapes = st.tuples(st.sampled_from([1, 2, 7, 16, 17, 64, 200]),
                        st.sampled_from([64, 129, 1024, 4096, 11008]),
                        st.sampled_from([128, 512, 4096, 5632]))
attn_shapes = st.tuples(st.sampled_from([1, 2]), st.sampled_from([1, 64, 200]),
                        st.sampled_from([1, 63, 700, 3000]), st.sampled_from([(32, 32), (32, 8), (12, 2)]),
                        st.sampled_from([64, 128]), st.sampled_from([16, 8, 4]))
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _gemm(shape: tuple[int, int, int], fmt: tuple[str, int]) -> dict[str, Any]:
    return gemm_row(*shape, fmt[0], fmt[1])


def _attention(s: tuple[Any, ...]) -> dict[str, Any]:
    b, q, kv, (h, hkv), d, bits = s
    return attention_row(b, q, max(kv, q), h, hkv, d, bits if q == 1 else 16)


def _lower(row: dict[str, Any], hw: GpuSpec) -> float:
    return float(roofline(pd.DataFrame([row]), hw)["t_lower_s"].iloc[0])


def _faster_clock(hw: GpuSpec, f: float) -> GpuSpec:
    c, tc, cc = hw.compute, hw.tensor_core, hw.cuda_core
    return dataclasses.replace(
        hw,
        compute=dataclasses.replace(c, boost_clock_MHz=c.boost_clock_MHz * f),
        tensor_core=dataclasses.replace(
            tc, datasheet_clock_MHz=tc.datasheet_clock_MHz * f,
            dense_peak_TFLOPs={k: v * f for k, v in tc.dense_peak_TFLOPs.items()}),
        cuda_core=dataclasses.replace(cc, fp32_peak_TFLOPs=cc.fp32_peak_TFLOPs * f,
                                      fp16_peak_TFLOPs=cc.fp16_peak_TFLOPs * f))


def _more_bandwidth(hw: GpuSpec, f: float) -> GpuSpec:
    dram = dataclasses.replace(hw.dram, bandwidth_GBps=hw.dram.bandwidth_GBps * f)
    return dataclasses.replace(hw, dram=dram)


@FAST
@given(st.sampled_from(GPUS), gemm_shapes, formats)
def test_gemm_never_below_its_roofline_bound(hw_name: str, shape: tuple[int, int, int],
                                             fmt: tuple[str, int]) -> None:
    hw = SPECS[hw_name]
    row = _gemm(shape, fmt)
    assert simulate_launch(row, hw).time_s >= _lower(row, hw) * (1 - REL)


@FAST
@given(st.sampled_from(GPUS), attn_shapes)
def test_attention_never_below_its_roofline_bound(hw_name: str, shape: tuple[Any, ...]) -> None:
    hw = SPECS[hw_name]
    row = _attention(shape)
    assert simulate_launch(row, hw).time_s >= _lower(row, hw) * (1 - REL)


@FAST
@given(st.sampled_from(GPUS), gemm_shapes, formats, st.sampled_from([1.25, 2.0]))
def test_more_bandwidth_or_a_faster_clock_is_never_slower(hw_name: str, shape: tuple[int, int, int],
                                                          fmt: tuple[str, int], f: float) -> None:
    hw = SPECS[hw_name]
    row = _gemm(shape, fmt)
    base = simulate_launch(row, hw).time_s
    assert simulate_launch(row, _more_bandwidth(hw, f)).time_s <= base * (1 + REL)
    # under the power limit both runs sit at the TDP clock, found by iteration to 1e-4 of itself
    # (mpsim/sim/gpu/model.py simulate_gpu_launch): equal within that, never slower beyond it
    assert simulate_launch(row, _faster_clock(hw, f)).time_s <= base * (1 + CLOCK_SEARCH_REL)


@FAST
@given(st.sampled_from(GPUS), attn_shapes, st.sampled_from([1.25, 2.0]))
def test_attention_monotone_in_bandwidth_and_clock(hw_name: str, shape: tuple[Any, ...], f: float) -> None:
    hw = SPECS[hw_name]
    row = _attention(shape)
    base = simulate_launch(row, hw).time_s
    assert simulate_launch(row, _more_bandwidth(hw, f)).time_s <= base * (1 + REL)
    assert simulate_launch(row, _faster_clock(hw, f)).time_s <= base * (1 + CLOCK_SEARCH_REL)


@pytest.mark.parametrize("hw_name", ["l40s", "rtx-4090"])
def test_gemv_bits_sweep_is_monotone_on_gddr_parts(hw_name: str) -> None:
    """Any-precision GEMVs on GDDR parts: fewer planes, fewer bytes and fewer instructions."""
    hw = SPECS[hw_name]
    outs = [simulate_launch(gemm_row(1, 11008, 4096, "anyprec", b), hw) for b in range(8, 1, -1)]
    times = [o.time_s for o in outs]
    assert times == sorted(times, reverse=True) and times[-1] < 0.5 * times[0]
    group = [simulate_launch(gemm_row(1, 11008, 4096, "group", b), hw) for b in (8, 4)]
    # half the bytes; each unpipelined trip's round trip does not shrink with them (0.62 on the 4090)
    assert group[0].bound == "dram" and group[1].time_s < 0.7 * group[0].time_s


def test_a_working_set_that_fits_in_l2_runs_faster() -> None:
    hw = SPECS["h200-sxm"]
    tiny_l2 = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, size_MiB=2.0))
    row = gemm_row(2048, 2048, 2048)  # 16 row tiles: a second GROUP_M band re-reads W
    fits, spills = simulate_launch(row, hw), simulate_launch(row, tiny_l2)
    assert fits.bytes_dram < spills.bytes_dram
    assert fits.time_s < spills.time_s


def test_the_previous_launchs_output_in_l2_is_read_faster() -> None:
    hw = SPECS["h100-sxm"]
    tr = synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(512, 1, 1))
    row = tr.rows[tr.rows["module"] == "attn_norm"].iloc[0].to_dict()
    row = {k: (None if v is pd.NA else v) for k, v in row.items()}
    cold, warm = simulate_launch(row, hw, resident=0.0), simulate_launch(row, hw, resident=8e6)
    assert warm.bytes_dram == cold.bytes_dram - 512 * 4096 * 2
    assert warm.time_s < cold.time_s


@pytest.mark.parametrize("hw_name", GPUS)
def test_decode_gemvs_stream_and_prefill_gemms_on_chip_bound(hw_name: str) -> None:
    hw = SPECS[hw_name]
    tr = synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(512, 2, 1))
    res = simulate(tr, hw, cache_dir=None)
    rows, out = tr.rows, res.launches
    gemm = (rows["op"] == "gemm") & (rows["module"] != "lm_head")
    # the one-row fp16 GEMV's K loop is pipelined (its configs' loop_stages): HBM- or CUDA-core-bound
    decode = gemm & (rows["phase"] == "decode")
    assert out.loc[decode, "bound"].isin(["dram", "cuda"]).all()
    # without loop_stages (the loop the 2026-12-04 H200 captures ran) its trips are unpipelined and
    # lock-step (mpsim_gemm.lockstep_trip_ns): bound by their round trips where those outlast the
    # wave's bytes (the H200, measured so: docs/validation.md#mpsims-own-kernels-on-an-h200; B200's
    # 8 TB/s drains a wave in less than the round trip), else by HBM or the CUDA cores
    plain = tr.rows.copy()
    plain["config"] = [c.replace('"loop_stages": 3, ', "") for c in plain["config"]]
    assert (plain["config"] != tr.rows["config"])[decode].all()
    old = simulate(dataclasses.replace(tr, rows=plain), hw, cache_dir=None).launches
    assert old.loc[decode, "bound"].isin(["dram", "cuda", "latency"]).all()
    if hw_name in ("h200-sxm", "b200-sxm"):
        assert (old.loc[decode, "bound"] == "latency").all()
    assert (old.loc[decode, "time_s"] > out.loc[decode, "time_s"]).all()
    math = gemm & (rows["phase"] == "prefill") & (roofline(rows, hw)["bound"] == "math")
    assert math.sum() >= 3 * 32  # qkv, gate_up and down of every layer at least
    assert out.loc[math, "bound"].isin(["tensor", "l2"]).all()  # on-chip, not HBM


def test_a_big_gemm_is_tensor_bound_where_l2_keeps_up() -> None:
    out = simulate_launch(gemm_row(4096, 4096, 4096), SPECS["a100-sxm-80gb"])
    assert out.bound == "tensor" and out.util["tensor"] > 0.75


def test_same_input_same_output() -> None:
    row = gemm_row(17, 4096, 11008, "anyprec", 3)
    a, b = simulate_launch(row, SPECS["h200-sxm"]), simulate_launch(row, SPECS["h200-sxm"])
    assert a == b
