"""The shipped tiny model: both backends generate the same text; quality falls as bits fall.

Backend agreement runs by default on a two-layer slice of the model for policies that together
cover every weight and KV path (group-quantized weights with int4 KV; any-precision weights read at
two widths with int8 KV; fp8 W8A8 with an fp8 e4m3 KV cache, issue 26; fp16 runs in lm_head every
step); NVFP4 weights on the slice and the whole model under four policies are the `slow` variants
(`make test-slow`).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from engine_cases import TIE_GAP, first_divergence

from mpsim.engine.backends import ReferenceBackend, TritonBackend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import FixedScheduler
from mpsim.engine.weights import ModelParams
from mpsim.policy import parse_policy
from mpsim.quality.heldout import fp16_baseline, heldout_windows, measure_quality
from mpsim.tiny.shipped import load_tiny


@pytest.fixture(scope="module")
def params() -> ModelParams:
    return load_tiny()[1]


def _two_layers(params: ModelParams) -> ModelParams:
    spec = dataclasses.replace(params.spec, num_layers=2)
    return dataclasses.replace(params, spec=spec, layers=params.layers[:2])


@pytest.mark.parametrize("policy", ["w3+kv4", "ap4-4@1-3+kv8", "fp8+kv8f"])
def test_both_backends_generate_the_same_text(params: ModelParams, policy: str) -> None:
    _backends_agree(_two_layers(params), policy, new_tokens=4)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["nvfp4"])
def test_both_backends_generate_the_same_text_fp4(params: ModelParams, policy: str) -> None:
    """The FP4 weight-only GEMV under the interpreter: about 2.5 minutes on two CPU cores."""
    _backends_agree(_two_layers(params), policy, new_tokens=4)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fp16", "w8", "w3+kv4", "ap4-4@2-3+kv8"])
def test_both_backends_generate_the_same_text_whole_model(params: ModelParams, policy: str) -> None:
    _backends_agree(params, policy, new_tokens=6)


def _backends_agree(params: ModelParams, policy: str, new_tokens: int) -> None:
    p = parse_policy(policy)
    prompts = [list(b"    def __init__(self"), list(b"import os\n")]  # ragged batch
    ref = generate(Decoder(params, p, ReferenceBackend()), prompts, new_tokens, FixedScheduler(p),
                   keep_logits=True)
    tri = generate(Decoder(params, p, TritonBackend()), prompts, new_tokens, FixedScheduler(p))
    where = first_divergence(ref.tokens, tri.tokens)
    if where is not None:  # allowed only at a tie of the reference's top two logits
        seq, step = where
        top2 = torch.topk(ref.logits[step][seq].float(), 2).values
        gap = float(top2[0] - top2[1])
        assert gap < TIE_GAP, f"{policy}: backends diverge at seq {seq} step {step} with a clear gap {gap}"
        pytest.xfail(f"{policy}: tie at seq {seq} step {step} (top-2 gap {gap:.2e}) flipped the choice")
    assert len(ref.tokens[0]) == new_tokens


def test_quality_falls_as_bits_fall(params: ModelParams) -> None:
    windows = heldout_windows(12, 48, seed=0)
    base = fp16_baseline(params, windows, 24, 24)
    reports = {p: measure_quality(params, p, None, windows, 24, 24, base)
               for p in ("fp16", "w8", "w4", "w3", "w2", "ap4-3", "ap4-4@8-3")}
    for r in reports.values():
        print(f"{r.policy:<12} bpb {r.bits_per_byte:.3f} agree {r.agreement_with_fp16:.3f} "
              f"rougeL {r.rouge_l_bytes:.3f}")
    ladder = ("fp16", "w8", "w4", "w3", "w2")
    agree = [reports[p].agreement_with_fp16 for p in ladder]
    rouge = [reports[p].rouge_l_bytes for p in ladder]
    bpb = {p: reports[p].bits_per_byte for p in ladder}
    # Agreement and Rouge-L fall with every bit removed. Bits/byte moves by under 0.01 between
    # 8, 4 and 3 bits on this model (within the sampling noise of 12 windows), so only its ends
    # are pinned: 2 bits costs clearly more than fp16, and 8 bits nothing measurable.
    assert agree == sorted(agree, reverse=True) and agree[-1] < agree[1] - 0.05
    assert rouge == sorted(rouge, reverse=True) and rouge[-1] < rouge[0] - 0.1
    assert bpb["fp16"] <= bpb["w8"] < bpb["w2"] and bpb["w2"] > bpb["fp16"] + 0.03
    lo, hi = reports["ap4-3"].agreement_with_fp16, reports["ap4-4@8-3"].agreement_with_fp16
    assert lo <= hi  # holding 4 bits for the first 8 steps keeps at least as much
