"""Trace synthesis: the launch list of a generation for every preset and policy family."""

from __future__ import annotations

import json

import pytest

from mpsim.models import PRESETS, ModelSpec
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.validate import validate_frame
from mpsim.workload import Workload


def _per_layer(spec: ModelSpec) -> int:
    # norm, qkv, rope, kv write, attention, o, [residual, norm], mlp up, act, mlp down, residual(s)
    return 12 if not spec.parallel_attn_mlp else 11


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("policy", ["fp16", "w4g64+kv8", "ap4-4@2-3+kv4"])
def test_every_preset_synthesizes_a_valid_trace(name: str, policy: str) -> None:
    spec = PRESETS[name]
    wl = Workload(prompt_len=7, gen_len=4, batch=2)
    rows = synthesize(spec, parse_policy(policy), wl).rows
    validate_frame(rows, "synth")
    per_pass = 1 + spec.num_layers * _per_layer(spec) + 3
    assert len(rows) == per_pass * wl.gen_len + 1  # prefill (+ last-token gather) + decode passes
    assert list(rows["launch_id"]) == list(range(len(rows)))
    decode = rows[rows["phase"] == "decode"]
    assert sorted(decode["step"].unique()) == [1, 2, 3]
    lm_head = rows[rows["module"] == "lm_head"]
    assert (lm_head["w_format"] == "fp16").all() and (lm_head["m"] == wl.batch).all()
    assert (lm_head["n"] == spec.vocab).all()


def test_prefill_and_decode_shapes() -> None:
    spec = PRESETS["llama-3-8b"]
    rows = synthesize(spec, parse_policy("w4+kv8"), Workload(100, 3, 4)).rows
    qkv = rows[rows["module"] == "qkv"]
    assert set(qkv["n"]) == {4096 + 2 * 8 * 128}  # GQA: 32 q heads, 8 kv heads
    assert list(qkv.groupby("phase")["m"].first().sort_index()) == [4, 400]
    attn = rows[rows["op"] == "attention"]
    pre, dec = attn[attn["phase"] == "prefill"], attn[attn["phase"] == "decode"]
    assert (pre["k_bits"] == 16).all() and (dec["k_bits"] == 8).all()
    assert sorted(dec["kv_len"].unique()) == [101, 102]
    assert (pre["q_len"] == 100).all() and (dec["q_len"] == 1).all()


def test_progressive_policy_switches_at_the_step() -> None:
    rows = synthesize(PRESETS["mobilellama-1.4b"], parse_policy("ap4-4@3-3"), Workload(8, 7, 1)).rows
    gemm = rows[(rows["op"] == "gemm") & (rows["module"] != "lm_head")]
    bits = gemm.groupby("step")["w_bits"].unique().map(lambda v: sorted(v))
    assert bits.to_dict() == {0: [4], 1: [4], 2: [4], 3: [4], 4: [3], 5: [3], 6: [3]}


def test_architecture_variants_change_the_launch_list() -> None:
    phi = synthesize(PRESETS["phi-1.5"], parse_policy("fp16"), Workload(4, 1, 1)).rows
    assert set(phi.loc[phi["op"] == "norm", "kernel"]) == {"layer_norm_kernel"}
    assert set(phi.loc[phi["op"] == "act", "kernel"]) == {"gelu_kernel"}
    assert {"fc1", "fc2"} <= set(phi["module"]) and "gate_up" not in set(phi["module"])
    assert phi.loc[phi["module"] == "qkv", "bias"].all()
    assert set(phi.loc[phi["op"] == "rope", "k"]) == {32}  # partial rotary: 50% of 64
    zephyr = synthesize(PRESETS["stablelm-zephyr-3b"], parse_policy("fp16"), Workload(4, 1, 1)).rows
    assert set(zephyr.loc[zephyr["op"] == "rope", "k"]) == {20}  # 25% of 80
    assert not zephyr.loc[zephyr["module"] == "qkv", "bias"].any()


def test_launch_configs_are_the_dispatchers() -> None:
    rows = synthesize(PRESETS["vicuna-7b"], parse_policy("w4"), Workload(512, 2, 1)).rows
    qkv = rows[rows["module"] == "qkv"]
    pre, dec = qkv[qkv["phase"] == "prefill"].iloc[0], qkv[qkv["phase"] == "decode"].iloc[0]
    assert pre["kernel"] == "gemm_group_kernel" and dec["kernel"] == "gemv_group_kernel"
    assert json.loads(dec["config"])["split_k"] >= 1
    interp = synthesize(PRESETS["vicuna-7b"], parse_policy("w4"), Workload(512, 2, 1), on_gpu=False).rows
    assert json.loads(interp.iloc[2]["config"]) != json.loads(rows.iloc[2]["config"])
