"""Quality measures: Rouge-L on hand-computed cases; bits per byte and agreement on a random model."""

from __future__ import annotations

import pytest
from engine_cases import SMALL

from mpsim.engine.weights import dummy_weights
from mpsim.quality.heldout import fp16_baseline, heldout_windows, measure_quality
from mpsim.quality.rouge import lcs_length, rouge_l, words


@pytest.mark.parametrize(("a", "b", "lcs"), [
    ("", "abc", 0), ("abc", "abc", 3), ("abcbdab", "bdcaba", 4), ("xyz", "abc", 0), ("axbxc", "abc", 3),
])
def test_lcs(a: str, b: str, lcs: int) -> None:
    assert lcs_length(list(a), list(b)) == lcs == lcs_length(list(b), list(a))


def test_rouge_l_hand_computed() -> None:
    # Lin (2004)'s example: reference "police killed the gunman", candidate "police kill the gunman":
    # LCS = 3 ("police the gunman"), P = R = 3/4, F = 0.75.
    ref, cand = b"police killed the gunman".split(), b"police kill the gunman".split()
    assert rouge_l(cand, ref) == pytest.approx(0.75)
    # candidate "the gunman kill police": LCS = 2, P = R = 2/4.
    assert rouge_l(b"the gunman kill police".split(), ref) == pytest.approx(0.5)
    assert rouge_l([], []) == 1.0 and rouge_l([1], []) == 0.0
    assert words(b"def f(x):\n    return x") == [b"def", b"f(x):", b"return", b"x"]


def test_fp16_scores_itself_perfectly_and_quantization_costs_something() -> None:
    params = dummy_weights(SMALL, seed=2)
    windows = heldout_windows(4, 24, seed=1)
    base = fp16_baseline(params, windows, 16, 8)
    same = measure_quality(params, "fp16", None, windows, 16, 8, base)
    assert same.agreement_with_fp16 == 1.0 and same.rouge_l_bytes == 1.0
    assert same.avg_bits_pmpd == 16 and same.avg_bits_mean == 16
    low = measure_quality(params, "w2", None, windows, 16, 8, base)
    assert low.agreement_with_fp16 < 1.0
    assert low.avg_bits_pmpd == 2
    prog = measure_quality(params, "ap4-4@3-2", None, windows, 16, 8, base)
    # decode passes 1..7: steps 1-3 at 4 bits, 4-7 at 2; PMPD counts passes 2..7 only.
    assert prog.avg_bits_mean == pytest.approx((3 * 4 + 4 * 2) / 7)
    assert prog.avg_bits_pmpd == pytest.approx((2 * 4 + 4 * 2) / 6)
