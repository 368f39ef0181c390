"""Energy beside the time models: per-launch energy_j, J/token, the TDP limit, and the GPU time model
left untouched."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.bench.npu import DECODE, step_split, trace_of
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.energy import energy_breakdown
from mpsim.sim.gpu.model import power_clock, simulate_gpu_launch
from mpsim.sim.keys import launch_keys, rep_row
from mpsim.sim.launch import bucketed
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.replay import resident_cap, simulate_launch
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.traces.trace import rows_to_frame
from mpsim.workload import Workload

HARDWARE = list_hardware()
MODELS = ("sim", "roofline")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("hw_name", ["h200-sxm", "npu-llm", "npu-edge", "a100-sxm-80gb"])
def test_energy_sums_to_the_run_and_splits_into_decode_and_prompt(model: str, hw_name: str) -> None:
    wl = Workload(48, 5, 2)
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("ap4-3+kv8"), wl)
    hw = load_hardware(hw_name)
    res = simulate(tr, hw, model, cache_dir=None)
    la, s = res.launches, res.summary
    assert (la["energy_j"] > 0).all()
    assert s.energy_j == pytest.approx(la["energy_j"].sum())
    decode = (tr.rows["phase"] == "decode").to_numpy()
    assert s.j_per_token == pytest.approx(la["energy_j"][decode].sum() / (wl.batch * (wl.gen_len - 1)))
    assert s.j_per_prompt_token == pytest.approx(la["energy_j"][~decode].sum() / (wl.batch * wl.prompt_len))
    assert s.avg_power_w == pytest.approx(s.energy_j / s.total_s)
    assert hw.energy is not None
    assert hw.energy.static_W < s.avg_power_w <= hw.energy.tdp_W
    parts = energy_breakdown(la, hw, model)
    assert np.allclose(sum(parts.values()), la["energy_j"])
    assert all((v >= -1e-15).all() for v in parts.values())


def _shapes() -> list[dict[str, object]]:
    gemms = [gemm_row(m, n, k, fmt, bits)
             for m, (n, k), (fmt, bits) in itertools.product(
                 (1, 16, 512, 4096), ((4096, 4096), (11008, 4096), (4096, 11008)),
                 (("fp16", 16), ("group", 4), ("anyprec", 3), ("group", 8)))]
    attention = [attention_row(b, 1, kv, 32, 8, 128, bits) for b, kv, bits in
                 itertools.product((1, 16), (512, 4096), (16, 8, 4))]
    prefill = [attention_row(1, q, q, 32, 32, 128) for q in (512, 2048)]
    return [*gemms, *attention, *prefill]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("hw_name", HARDWARE)
def test_no_launch_and_no_run_draws_more_than_the_tdp(model: str, hw_name: str) -> None:
    hw = load_hardware(hw_name)
    assert hw.energy is not None, "every shipped file carries an energy block"
    memo = LaunchMemo(None)
    for row in _shapes():
        res = simulate(rows_to_frame([row]), hw, model, memo=memo)
        power = res.summary.energy_j / res.summary.total_s
        # the GPU model holds a power-limited launch at the TDP to within the clock search's settling
        # (tests/sim/test_power_clock.py, SETTLE)
        assert power <= hw.energy.tdp_W * (1 + 1e-2), (row["kernel"], row.get("m"), row.get("n"), power)
    for policy in ("fp16", "w4", "ap3"):  # whole runs: prefill-heavy and decode-heavy
        for wl in (Workload(256, 2, 2), Workload(64, 12, 1)):
            res = simulate(synthesize(PRESETS["vicuna-7b"], parse_policy(policy), wl), hw, model,
                           memo=memo)
            assert res.summary.avg_power_w <= hw.energy.tdp_W * (1 + 1e-2)


@pytest.mark.parametrize("hw_name", ["npu-llm", "h200-sxm"])
def test_dram_energy_dominates_fp16_decode_and_falls_with_bits(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    split, jpt = {}, {}
    for policy in ("fp16", "w4", "ap3"):
        tr = trace_of(policy, DECODE)
        res = simulate(tr, hw, cache_dir=None)
        split[policy] = step_split(res, tr.rows, hw)
        jpt[policy] = res.summary.j_per_token
    fp16 = split["fp16"]
    dynamic = (fp16["onchip_mJ"], fp16["compute_mJ"])
    assert fp16["dram_mJ"] > max(dynamic)
    if hw_name == "npu-llm":  # streams at its bandwidth: DRAM is most of the step's energy
        others = (*dynamic, fp16["static_mJ"])
        assert fp16["dram_mJ"] > max(others) and fp16["dram_mJ"] > 0.5 * sum((fp16["dram_mJ"], *others))
    else:  # mpsim's one-row GEMVs are latency-bound on the H200 (measured): the step runs ~2x its
        # bytes' time, so the static share is about DRAM's (docs/validation.md)
        assert fp16["static_mJ"] > 0.5 * fp16["dram_mJ"]
    assert split["fp16"]["dram_mJ"] > split["w4"]["dram_mJ"] > split["ap3"]["dram_mJ"]
    assert jpt["fp16"] > max(jpt["w4"], jpt["ap3"])
    if hw_name == "npu-llm":  # a decoder that keeps up: energy follows the bytes
        assert jpt["w4"] > jpt["ap3"]


def test_gpu_anyprec_decode_runs_longer_than_w4_as_measured() -> None:
    """On the H200 ap4's one-row trips took 3.7-4.2 us against int4's 1.5-2.0 (unpipelined loops:
    docs/validation.md#mpsims-own-kernels-on-an-h200). With the loops pipelined (loop_stages) the
    model has ap3 issue-bound (its loop: 6.98 issue slots per weight against w4's 3.78, sm_90a
    SASS, above H200's ~2.6 budget at 0.375 bytes a weight) and w4 near its bytes: still longer."""
    hw = load_hardware("h200-sxm")
    static = {}
    for policy in ("w4", "ap3"):
        tr = trace_of(policy, DECODE)
        static[policy] = step_split(simulate(tr, hw, cache_dir=None), tr.rows, hw)["static_mJ"]
    assert static["ap3"] > static["w4"]  # slower: more static energy


def test_a_file_without_energy_gives_nan_energy_and_the_same_times() -> None:
    """Without an `energy:` block a GPU runs every launch at its boost clock (no power limit:
    mpsim/sim/gpu/model.py power_clock), so the times are the same wherever the launch stays within
    the TDP at boost, and shorter where it would not (here the prefill's tiled int4 GEMMs)."""
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("w4+kv8"), Workload(32, 3, 1))
    for name in ("h200-sxm", "npu-llm"):
        hw = load_hardware(name)
        bare = dataclasses.replace(hw, energy=None)
        a, b = simulate(tr, hw, cache_dir=None), simulate(tr, bare, cache_dir=None)
        assert b.launches["energy_j"].isna().all() and np.isnan(b.summary.j_per_token)
        same = np.ones(len(tr.rows), dtype=bool)
        if isinstance(hw, GpuSpec):
            same = np.array([not _power_limited(row, hw) for row in tr.rows.to_dict("records")])
            assert (b.launches["time_s"][~same] < a.launches["time_s"][~same]).all()
        assert same.sum() > 0.9 * len(same)
        assert np.array_equal(a.launches["time_s"][same], b.launches["time_s"][same])


def _power_limited(row: dict[str, object], hw: GpuSpec) -> bool:
    """Whether a launch run alone at the boost clock draws more than the TDP (power_clock < boost)."""
    boost = hw.compute.boost_clock_MHz * 1e6
    out = simulate_gpu_launch(bucketed(row), hw, DEFAULT_PARAMS, clock_hz=boost)
    return power_clock(hw, DEFAULT_PARAMS, out) < boost * (1 - 1e-9)


@pytest.mark.parametrize("hw_name", [n for n in HARDWARE if not n.startswith("npu")])
@pytest.mark.parametrize(("model", "policy"), [("vicuna-7b", "fp16"), ("qwen2.5-1.5b", "ap4-3+kv4"),
                                               ("llama-3-8b", "w4+kv8")])
def test_gpu_times_are_the_gpu_models_own(hw_name: str, model: str, policy: str) -> None:
    # Energy is added beside the GPU time model: every launch's time is still exactly what the GPU
    # model gives that launch (never below its roofline bound, never clamped), laid end to end.
    tr = synthesize(PRESETS[model], parse_policy(policy), Workload(96, 4, 2))
    hw = load_hardware(hw_name)
    assert isinstance(hw, GpuSpec)
    out = simulate(tr, hw, cache_dir=None).launches
    codes, reps = launch_keys(tr.rows, resident_cap(hw, DEFAULT_PARAMS))
    own = np.asarray([simulate_launch(rep_row(r), hw, resident=float(r["resident"])).time_s
                      for r in reps.to_dict("records")])[codes]
    expect = own
    assert (expect >= roofline(tr.rows, hw, resident=True)["t_lower_s"].to_numpy() * (1 - 1e-9)).all()
    assert np.array_equal(out["time_s"].to_numpy(), expect)
    assert np.array_equal(out["end_s"].to_numpy(), np.cumsum(expect))
    assert np.array_equal(out["busy_start_s"], out["start_s"]) and np.array_equal(
        out["busy_end_s"], out["end_s"])


def test_energy_columns_reach_the_results_table() -> None:
    tr = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("fp16"), Workload(16, 2, 1))
    res = simulate(tr, load_hardware("npu-edge"), cache_dir=None)
    assert {"busy_start_s", "busy_end_s", "energy_j"} <= set(res.launches.columns)
    assert isinstance(res.launches, pd.DataFrame)
