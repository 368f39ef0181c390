"""Policy grammar: the spellings of docs/design.md#policies, errors that show the grammar, round trips."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpsim.errors import MpsimInputError
from mpsim.policy import (
    GRAMMAR,
    mean_decode_bits,
    parse_policy,
    pmpd_average_bits,
)


@pytest.mark.parametrize(("text", "family", "prefill", "schedule", "group", "kv"), [
    ("fp16", "fp16", 16, ((1, 16),), None, 16),
    ("w4", "uniform", 4, ((1, 4),), 128, 16),
    ("w4g64", "uniform", 4, ((1, 4),), 64, 16),
    ("w3", "uniform", 3, ((1, 3),), 128, 16),
    ("w2", "uniform", 2, ((1, 2),), 128, 16),
    ("w8", "uniform", 8, ((1, 8),), 128, 16),
    ("ap3", "anyprec", 3, ((1, 3),), None, 16),
    ("ap4-3", "anyprec", 4, ((1, 3),), None, 16),
    ("ap4-4@85-3", "anyprec", 4, ((1, 4), (86, 3)), None, 16),
    ("ap4-4@40-3@80-2", "anyprec", 4, ((1, 4), (41, 3), (81, 2)), None, 16),
    ("w4+kv8", "uniform", 4, ((1, 4),), 128, 8),
    ("ap4-3+kv4", "anyprec", 4, ((1, 3),), None, 4),
    ("fp16+kv8", "fp16", 16, ((1, 16),), None, 8),
])
def test_spellings(text: str, family: str, prefill: int, schedule: tuple[tuple[int, int], ...],
                   group: int | None, kv: int) -> None:
    p = parse_policy(text)
    assert (p.family, p.prefill_bits, p.decode_schedule, p.group_size, p.kv_bits) == (
        family, prefill, schedule, group, kv)
    assert str(p) == text


def test_progressive_switch_points() -> None:
    p = parse_policy("ap4-4@40-3@80-2")
    assert [p.decode_bits(s) for s in (1, 40, 41, 80, 81, 500)] == [4, 4, 3, 3, 2, 2]
    assert p.weights_at("prefill", 0).bits == 4
    assert p.weights_at("decode", 81).w_format == "anyprec"
    assert p.parent_bits == 4


def test_uniform_weights_format() -> None:
    w = parse_policy("w3g64").weights_at("decode", 5)
    assert (w.w_format, w.bits, w.group_size) == ("int3-group", 3, 64)


@pytest.mark.parametrize("text", [
    "", "fp32", "w5", "w4g48", "w4g0", "ap1", "ap9", "ap3-4", "ap4-4@80-3@40-2", "w4+kv2",
    "w4+kv16", "ap4-4@-3", "ap4-", "AP4", "w4 kv8",
])
def test_bad_spellings_show_grammar(text: str) -> None:
    with pytest.raises(MpsimInputError) as err:
        parse_policy(text)
    assert GRAMMAR in str(err.value)
    assert repr(text.strip()) in str(err.value) or repr(text) in str(err.value)


@st.composite
def anyprec_spellings(draw: st.DrawFn) -> tuple[str, int, list[tuple[int, int]]]:
    prefill = draw(st.integers(2, 8))
    widths = sorted(draw(st.lists(st.integers(2, prefill), min_size=1, max_size=4)), reverse=True)
    steps = sorted(draw(st.sets(st.integers(1, 4000), min_size=len(widths) - 1,
                                max_size=len(widths) - 1)))
    text = f"ap{prefill}-{widths[0]}" + "".join(f"@{s}-{b}" for s, b in zip(steps, widths[1:], strict=True))
    return text, prefill, [(1, widths[0])] + [(s + 1, b) for s, b in zip(steps, widths[1:], strict=True)]


@given(anyprec_spellings(), st.sampled_from(["", "+kv8", "+kv4"]))
def test_anyprec_grammar_round_trip(case: tuple[str, int, list[tuple[int, int]]], kv: str) -> None:
    text, prefill, schedule = case
    p = parse_policy(text + kv)
    assert p.prefill_bits == prefill and list(p.decode_schedule) == schedule
    assert p.kv_bits == (int(kv[3:]) if kv else 16)
    bits = [p.decode_bits(s) for s in range(1, 4100)]
    assert all(a >= b for a, b in pairwise(bits)), "precision never rises"


@given(st.text(max_size=24))
def test_any_text_parses_or_fails_cleanly(text: str) -> None:
    try:
        parse_policy(text)
    except MpsimInputError as exc:
        assert "Grammar:" in str(exc)


def test_average_bits_two_ways() -> None:
    log = [[4, 4, 3, 3], [4, 3]]  # decode passes 1..n of two samples
    assert pmpd_average_bits(log) == pytest.approx(((4 + 3 + 3) / 3 + 3 / 1) / 2)
    assert mean_decode_bits(log) == pytest.approx(21 / 6)
