"""PMPD's scheduling semantics: switch points in decode steps, monotone widths, one rung at a time,
and per-sequence widths in one batch that match separate runs exactly."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from engine_cases import SMALL
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import (
    ConstantSwitch,
    FixedScheduler,
    Ladder,
    StepState,
    SwitchScheduler,
    candidate_points,
    check_schedule,
    log_policy,
    switch_policy,
    switch_step,
)
from mpsim.engine.weights import dummy_weights
from mpsim.policy import parse_policy

LADDER = Ladder((4, 3))
PROMPTS = [[1, 2, 3, 4, 5], [9, 8, 7], [5, 5, 5, 5], [100, 20, 3, 4, 6, 7]]


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    return Decoder(dummy_weights(SMALL, 1), LADDER.policy(), make_backend("reference"))


@dataclass
class Given(SwitchScheduler):
    given: tuple[int, ...] = ()

    def choose(self, state: StepState) -> list[int]:
        return list(self.given)


def test_candidate_points_are_pmpds_thirds() -> None:
    assert candidate_points(32) == [0, 11, 21, 32]
    assert candidate_points(30, 3) == [0, 10, 20, 30]
    assert candidate_points(8, 1) == [0, 8]
    for bad in (0, 9):
        with pytest.raises(ValueError, match="segments"):
            candidate_points(8, bad)


@pytest.mark.parametrize("switch", [0, 1, 3, 6, 7, 50])
def test_switch_point_counts_decode_steps(decoder: Decoder, switch: int) -> None:
    gen_len = 7  # decode steps 1..6
    out = generate(decoder, PROMPTS, gen_len, ConstantSwitch(LADDER, switch=switch))
    expect = [4] * min(switch, gen_len - 1) + [3] * max(0, gen_len - 1 - switch)
    assert out.prefill_bits == 4
    assert all(log == expect for log in out.decode_bits)
    assert all(switch_step(log, 4) == min(switch, gen_len - 1) for log in out.decode_bits)
    policy = parse_policy(switch_policy(LADDER, switch, gen_len))
    fixed = generate(decoder, PROMPTS, gen_len, FixedScheduler(policy))
    assert fixed.decode_bits == out.decode_bits and fixed.tokens == out.tokens


def test_per_sequence_widths_match_separate_runs_exactly(decoder: Decoder) -> None:
    switches = (0, 2, 6, 1)
    mixed = generate(decoder, PROMPTS, 7, Given(LADDER, given=switches), keep_logits=True)
    for i, s in enumerate(switches):
        alone = generate(decoder, [PROMPTS[i]], 7, FixedScheduler(parse_policy(switch_policy(LADDER, s, 7))),
                         keep_logits=True)
        assert mixed.tokens[i] == alone.tokens[0]
        assert mixed.decode_bits[i] == alone.decode_bits[0]
        assert all(torch.equal(a[i], b[0]) for a, b in zip(mixed.logits, alone.logits, strict=True))


@dataclass
class Rising:
    name: str = "rising"

    def start(self, batch: int) -> None:
        return None

    def prefill_bits(self) -> int:
        return 3

    def decode_bits(self, state: StepState) -> list[int]:
        return [3, 3, 3, 4] if state.step == 2 else [3] * 4


def test_engine_refuses_a_rising_width(decoder: Decoder) -> None:
    with pytest.raises(ValueError, match="sequence 3, decode step 2: width rose from 3 to 4"):
        generate(decoder, PROMPTS, 4, Rising())


def test_engine_refuses_a_wrong_number_of_widths(decoder: Decoder) -> None:
    with pytest.raises(ValueError, match="2 widths for a batch of 4"):
        generate(decoder, PROMPTS, 3, Given(LADDER, given=(1, 2)))


def test_scheduler_sees_prefill_kv_and_logits(decoder: Decoder) -> None:
    seen: list[StepState] = []

    @dataclass
    class Spy(ConstantSwitch):
        def choose(self, state: StepState) -> list[int]:
            seen.append(state)
            return super().choose(state)

    generate(decoder, PROMPTS, 3, Spy(LADDER, switch=1))
    state = seen[0]
    assert state.step == 1 and state.prompt_lens == tuple(len(p) for p in PROMPTS)
    assert state.last_logits is not None and state.last_logits.shape == (4, SMALL.vocab)
    assert state.last_kv is not None
    k, v = state.last_kv
    assert k.shape == v.shape == (4, SMALL.num_kv_heads, 6, SMALL.head_dim)
    assert k.dtype == torch.float16 and bool(k[0, :, :5].abs().sum() > 0)


def test_check_schedule_monotone_and_one_rung() -> None:
    three = Ladder((4, 3, 2))
    check_schedule(4, [4, 4, 3, 3, 2], three)
    check_schedule(4, [3, 3], LADDER)
    with pytest.raises(ValueError, match="rose"):
        check_schedule(4, [3, 4])
    with pytest.raises(ValueError, match="skips a rung"):
        check_schedule(4, [4, 2], three)
    with pytest.raises(ValueError, match="leaves the ladder"):
        check_schedule(4, [4, 2], LADDER)


def test_ladder_validation() -> None:
    for bad in ((4,), (3, 4), (4, 4)):
        with pytest.raises(ValueError, match="strictly decreasing"):
            Ladder(bad)
    assert LADDER.policy().parent_bits == 4


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.lists(st.integers(0, 3), min_size=0, max_size=30))
def test_log_policy_replays_any_monotone_log(prefill: int, drops: list[int]) -> None:
    widths, log = prefill, []
    for d in drops:  # each step may fall by 0..3 bits, never below 2
        widths = max(2, widths - d)
        log.append(widths)
    policy = parse_policy(log_policy(prefill, log))
    assert policy.prefill_bits == prefill
    assert [policy.decode_bits(s) for s in range(1, len(log) + 1)] == log


def test_mixed_widths_with_a_quantized_kv_cache() -> None:
    dec = Decoder(dummy_weights(SMALL, 1), parse_policy("ap4-3+kv8"), make_backend("reference"))
    switches = (3, 0, 6, 1)
    seen: list[StepState] = []

    @dataclass
    class Spy(Given):
        def choose(self, state: StepState) -> list[int]:
            seen.append(state)
            return super().choose(state)

    mixed = generate(dec, PROMPTS, 7, Spy(LADDER, given=switches), keep_logits=True)
    assert seen[0].last_kv is not None and seen[0].last_kv[0].dtype == torch.float16
    for i, s in enumerate(switches):
        policy = parse_policy(switch_policy(LADDER, s, 7) + "+kv8")
        alone = generate(dec, [PROMPTS[i]], 7, FixedScheduler(policy), keep_logits=True)
        assert mixed.tokens[i] == alone.tokens[0]
        assert all(torch.equal(a[i], b[0]) for a, b in zip(mixed.logits, alone.logits, strict=True))
