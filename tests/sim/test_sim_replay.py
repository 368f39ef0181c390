"""Trace replay: registry, alignment, summary, memo and buckets, every preset on every hardware."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.launch_plan import attention_row, costed
from mpsim.models import PRESETS
from mpsim.policy import parse_policy
from mpsim.sim import PERF_MODELS, check_model, simulate
from mpsim.sim.keys import launch_keys
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.npu.replay import step_bounds
from mpsim.sim.result import LAUNCH_COLUMNS
from mpsim.sim.roofline import roofline
from mpsim.synth import synthesize
from mpsim.traces.schema import COLUMNS
from mpsim.traces.trace import Trace
from mpsim.workload import Workload

REL = 1e-9


def costed_again(row: dict[str, Any]) -> dict[str, Any]:
    """A `mpsim op`-style row (costed, grid/config JSON) re-costed after a shape edit."""
    import json
    row = dict(row, grid=json.loads(row["grid"]), config=json.loads(row["config"]))
    return costed(row)


SMALL = Workload(64, 4, 2)


def _trace(model: str = "qwen2.5-1.5b", policy: str = "ap4-3+kv4", wl: Workload = SMALL,
           on_gpu: bool = True, kv_block: int | None = None) -> Trace:
    return synthesize(PRESETS[model], parse_policy(policy), wl, on_gpu=on_gpu, kv_block=kv_block)


def test_unknown_model_names_the_valid_ones() -> None:
    with pytest.raises(MpsimInputError, match="valid: sim, roofline"):
        check_model("cycle-exact")
    assert set(PERF_MODELS) == {"sim", "roofline"}


def test_roofline_model_is_the_roofline() -> None:
    tr, hw = _trace(), load_hardware("h100-sxm")
    res = simulate(tr, hw, "roofline", cache_dir=None)
    assert np.array_equal(res.launches["time_s"].to_numpy(), roofline(tr.rows, hw)["t_lower_s"].to_numpy())


@pytest.mark.parametrize(("model", "policy", "kw"), [
    ("qwen2.5-1.5b", "ap4-3+kv4", {}),
    ("phi-1.5", "w4g64+kv8", {"kv_block": 64}),
    ("stablelm-zephyr-3b", "fp16", {"on_gpu": False}),
    ("llama-3-8b", "w2", {}),
])
@pytest.mark.parametrize("hw_name", ["h200-sxm", "l40s", "npu-llm", "npu-edge"])
def test_every_launch_at_or_above_its_roofline_bound(model: str, policy: str, kw: dict[str, Any],
                                                     hw_name: str) -> None:
    tr, hw = _trace(model, policy, SMALL, **kw), load_hardware(hw_name)
    out = simulate(tr, hw, cache_dir=None).launches
    if hw.kind == "npu":  # overlapped steps: the bound holds per step, not per launch share
        starts, ends = step_bounds(tr.rows)
        for a, b in zip(starts, ends, strict=True):
            step = out.iloc[a:b]
            assert step["time_s"].sum() >= step["bytes_dram"].sum() / hw.dram_bandwidth_Bps()
        return
    assert (out["time_s"] >= out["t_lower_s"] * (1 - REL)).all()
    raw = out["kernel_s"] + out["overhead_s"]
    assert np.array_equal(out["time_s"].to_numpy(), raw.to_numpy())  # never clamped
    resident = roofline(tr.rows, hw, resident=True)["t_lower_s"].to_numpy()
    assert np.array_equal(out["t_lower_s"].to_numpy(), resident)
    if hw.kind == "npu":  # no residency credit on an NPU: the bound is the plain roofline
        assert np.array_equal(resident, roofline(tr.rows, hw)["t_lower_s"].to_numpy())


def test_result_is_aligned_and_summarized() -> None:
    tr, hw = _trace(), load_hardware("a100-sxm-80gb")
    res = simulate(tr, hw, cache_dir=None)
    out = res.launches
    assert list(out.columns) == list(LAUNCH_COLUMNS)
    assert out.index.equals(tr.rows.index)
    assert np.array_equal(out["launch_id"].to_numpy(), tr.rows["launch_id"].to_numpy())
    assert np.allclose(out["end_s"] - out["start_s"], out["time_s"])
    assert (out["start_s"].to_numpy()[1:] == out["end_s"].to_numpy()[:-1]).all()
    s = res.summary
    assert s.total_s == pytest.approx(out["time_s"].sum())
    assert s.ttft_s + 3 * s.tpot_mean_s == pytest.approx(s.total_s)
    assert sum(s.time_by_op_s.values()) == pytest.approx(s.total_s)
    from_rows = simulate(tr.rows, hw, cache_dir=None)  # batch and gen_len inferred
    assert from_rows.summary == s


def test_same_input_same_output(tmp_path: Path) -> None:
    tr, hw = _trace("mobilellama-1.4b", "ap4-4@2-3"), load_hardware("h200-sxm")
    a = simulate(tr, hw, cache_dir=None)
    b = simulate(tr, hw, cache_dir=None)
    pd.testing.assert_frame_equal(a.launches, b.launches)


def test_disk_memo_is_warm_and_keyed_by_hardware_content(tmp_path: Path) -> None:
    tr, hw = _trace(), load_hardware("h100-sxm")
    cold = simulate(tr, hw, cache_dir=tmp_path)
    warm = simulate(tr, hw, cache_dir=tmp_path)
    assert cold.stats["simulated"] > 0 and warm.stats["simulated"] == 0
    assert warm.stats["memo_hits"] == cold.stats["simulated"]
    pd.testing.assert_frame_equal(cold.launches, warm.launches)
    other = dataclasses.replace(hw, dram=dataclasses.replace(hw.dram, achievable_bandwidth_fraction=0.5))
    changed = simulate(tr, other, cache_dir=tmp_path)
    assert changed.stats["simulated"] == cold.stats["simulated"]
    assert changed.summary.total_s > cold.summary.total_s
    memo = LaunchMemo(None)
    first = simulate(tr, hw, memo=memo)
    again = simulate(tr, hw, memo=memo)
    assert first.stats["simulated"] > 0 and again.stats["simulated"] == 0


def test_decode_attention_is_bucketed_by_kv_tiles() -> None:
    tr = _trace("vicuna-7b", "fp16", Workload(60, 12, 1))  # kv 61..71 spans two 64-token tiles
    rows = tr.rows
    codes, reps = launch_keys(rows, 0.0)
    attn = (rows["op"] == "attention") & (rows["phase"] == "decode") & (rows["layer"] == 0)
    kv = rows.loc[attn, "kv_len"].to_numpy()
    c = codes[attn.to_numpy()]
    assert len(set(c[kv <= 64])) == 1 and len(set(c[kv > 64])) == 1 and c[0] != c[-1]
    assert set(reps.loc[reps["op"] == "attention", "kv_len"].dropna().astype(int)) >= {64, 128}
    out = simulate(tr, load_hardware("h200-sxm"), cache_dir=None).launches
    t = out.loc[attn, "time_s"].to_numpy()
    assert len(set(t[kv <= 64])) == 1  # one bucket, one simulated time
    assert (out.loc[attn, "time_s"] >= out.loc[attn, "t_lower_s"]).all()


@pytest.mark.parametrize("hw", ["h200-sxm", "npu-llm"])
def test_decode_attention_over_sequences_of_different_lengths(hw: str) -> None:
    """kv_tokens (the batch's KV tokens) prices decode attention below the uniform batch at the longest
    length (and, on the GPU, above the uniform batch at the mean: the longest sequence's splits make
    the tail); equal kv_tokens give one key, different ones two."""
    def row(kv_len: int, kv_tokens: int) -> dict[str, Any]:
        r = attention_row(16, 1, kv_len, 32, 32, 128, 8, 16)
        r.update(kv_tokens=kv_tokens)
        return costed_again(r)

    frame = pd.DataFrame([row(2048, 16 * 512), row(2048, 16 * 512), row(2048, 16 * 2048),
                          row(512, 16 * 512)]).reindex(columns=list(COLUMNS)).astype(COLUMNS)
    codes, _ = launch_keys(frame, 0.0)
    assert codes[0] == codes[1] and len(set(codes)) == 3
    t = simulate(frame, load_hardware(hw), cache_dir=None).launches["time_s"].to_numpy()
    assert t[0] < t[2]
    assert t[3] < t[0] or hw != "h200-sxm"


def test_every_preset_and_policy_runs_on_every_hardware() -> None:
    wl = Workload(16, 3, 1)
    for hw_name in list_hardware():
        hw, memo = load_hardware(hw_name), LaunchMemo(None)
        for preset in PRESETS:
            res = simulate(_trace(preset, "ap4-4@1-3+kv8", wl), hw, memo=memo)
            assert np.isfinite(res.launches["time_s"]).all() and res.summary.tokens_per_s > 0
        for policy in ("fp16", "w8", "w4g64", "w3grow", "w2", "ap8", "ap5", "ap3-2", "fp16+kv4"):
            res = simulate(_trace("qwen2.5-1.5b", policy, wl), hw, memo=memo)
            assert np.isfinite(res.launches["energy_j"]).all() and res.summary.j_per_token > 0
            if hw.kind == "gpu":  # NPU launch shares overlap (per-step bounds: test_sim_npu.py)
                assert (res.launches["time_s"] >= res.launches["t_lower_s"] * (1 - REL)).all()
