"""Roofline baseline: bounds and run summaries."""

from __future__ import annotations

import numpy as np
import pytest

from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim.roofline import roofline
from mpsim.sim.summary import summarize
from mpsim.synth import synthesize
from mpsim.workload import Workload


def test_decode_pass_is_bytes_over_bandwidth_on_h200() -> None:
    hw = load_hardware("h200-sxm")
    rows = synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(512, 3, 1)).rows
    bounds = roofline(rows, hw)
    one = ((rows["phase"] == "decode") & (rows["step"] == 1)).to_numpy()
    nbytes = (rows["bytes_read"] + rows["bytes_written"])[one].sum()
    assert bounds["t_lower_s"][one].sum() == pytest.approx(nbytes / 4.8e12, rel=0.02)
    assert nbytes / 4.8e12 == pytest.approx(13.21e9 / 4.8e12, rel=0.03)


@pytest.mark.parametrize("hw_name", list_hardware())
def test_bounds_are_consistent_on_every_hardware(hw_name: str) -> None:
    hw = load_hardware(hw_name)
    rows = synthesize(PRESETS["qwen2.5-1.5b"], parse_policy("ap4-3+kv4"), Workload(64, 4, 2)).rows
    b = roofline(rows, hw)
    assert (b["t_lower_s"] >= b["t_math_s"]).all() and (b["t_lower_s"] >= b["t_mem_s"]).all()
    assert (b["t_lower_s"] > 0).all()
    s = summarize(rows, b["t_lower_s"].to_numpy(), 2, 4)
    assert s.total_s == pytest.approx(b["t_lower_s"].sum())
    assert s.ttft_s + 3 * s.tpot_mean_s == pytest.approx(s.total_s)
    assert sum(s.time_by_op_s.values()) == pytest.approx(s.total_s)


def test_prefill_gemm_is_math_bound_and_decode_gemv_memory_bound() -> None:
    hw = load_hardware("h100-sxm")
    rows = synthesize(PRESETS["vicuna-7b"], parse_policy("fp16"), Workload(2048, 2, 1)).rows
    b = roofline(rows, hw)
    gemm = (rows["op"] == "gemm") & (rows["module"] != "lm_head")
    pre = (gemm & (rows["phase"] == "prefill")).to_numpy()
    dec = (gemm & (rows["phase"] == "decode")).to_numpy()
    assert (b["bound"][pre] == "math").all()
    assert (b["bound"][dec] == "memory").all()


def test_fewer_bits_faster_decode() -> None:
    hw = load_hardware("npu-llm")
    times = []
    for policy in ("fp16", "w8", "w4", "w3", "w2"):
        rows = synthesize(PRESETS["vicuna-7b"], parse_policy(policy), Workload(128, 3, 1)).rows
        dec = (rows["phase"] == "decode").to_numpy()
        times.append(roofline(rows, hw)["t_lower_s"].to_numpy()[dec].sum())
    assert np.all(np.diff(times) < 0)


def test_the_resident_bound_per_distinct_launch_is_the_bound_per_row() -> None:
    """The replay computes a launch's input bytes and warmth once per distinct launch key; the
    bound it gets is the one computed row by row."""
    from mpsim.sim.keys import launch_keys
    from mpsim.sim.replay import first_of_codes
    from mpsim.sim.roofline import roofline_terms

    hw = load_hardware("h100-sxm")
    rows = synthesize(PRESETS["llama-3-8b"], parse_policy("ap4-4@3-3+kv8"), Workload(40, 6, 3),
                      kv_block=64).rows
    codes, _ = launch_keys(rows, 0.0)
    plain = roofline_terms(rows, hw, resident=True)
    keyed = roofline_terms(rows, hw, resident=True, keyed=(first_of_codes(codes), codes))
    for a, b in zip(plain, keyed, strict=True):
        assert np.array_equal(a, b)
    assert (plain[3] < roofline_terms(rows, hw)[3]).any()  # some credit was given


def test_a_warm_add_larger_than_l2_stays_above_its_bound() -> None:
    """An add measured inside a forward (`l2_warm`) whose reads exceed the L2 still finds its second
    input there: the bound credits up to an L2 of its reads (it credited nothing, and the simulated
    time fell below it: BelowBoundError on Vidur's H100 add rows of 4096+ tokens)."""
    from mpsim.launch_plan import framework_op_row
    from mpsim.library.torch import TORCH_ADD
    from mpsim.sim import simulate
    from mpsim.traces.trace import rows_to_frame

    hw = load_hardware("h100-sxm")
    row = framework_op_row(TORCH_ADD, 4096, 4096, l2_warm=True)
    assert row["bytes_read"] > hw.l2.size_MiB * 2**20
    out = simulate(rows_to_frame([row]), hw, cache_dir=None).launches
    assert out["time_s"].iloc[0] >= out["t_lower_s"].iloc[0]
    plain = roofline(rows_to_frame([row]), hw)
    assert out["t_lower_s"].iloc[0] < plain["t_lower_s"].iloc[0]
