"""Average bits counted both ways on hand-made precision logs, and the schedulers whose widths are
decided step by step (confidence, budget) or drawn (random)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_cases import SMALL

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import Ladder, StepState
from mpsim.engine.weights import dummy_weights
from mpsim.policy import mean_decode_bits, pmpd_average_bits
from mpsim.schedulers.baselines import ConfidenceSwitch, RandomSwitch
from mpsim.schedulers.budget import BudgetSwitch, high_counts, high_fraction_plan
from mpsim.schedulers.runs import RunScore

LADDER = Ladder((4, 3))


def test_two_counts_on_hand_made_logs() -> None:
    logs = [[4, 4, 4], [4, 3, 3, 3, 3, 3, 3]]
    # PMPD: per sample the mean over passes 2..n: (4+4)/2 = 4 and (3*6)/6 = 3, then the mean: 3.5
    assert pmpd_average_bits(logs) == pytest.approx((4 + 3) / 2)
    # plain mean over all 10 passes: (3*4 + 4 + 6*3) / 10
    assert mean_decode_bits(logs) == pytest.approx((12 + 4 + 18) / 10)


def test_pmpd_count_skips_first_pass_and_single_pass_samples() -> None:
    logs = [[3], [4, 2, 2]]  # sample 1 has no pass 2..n: PMPD leaves it out, the mean keeps it
    assert pmpd_average_bits(logs) == pytest.approx(2.0)
    assert mean_decode_bits(logs) == pytest.approx((3 + 4 + 2 + 2) / 4)


def test_run_score_reports_both_counts() -> None:
    logs = [[4, 4, 3], [4, 3, 3]]
    s = RunScore(np.ones(2), np.ones(2), 4, logs)
    assert s.avg_bits_pmpd == pmpd_average_bits(logs) and s.avg_bits_mean == mean_decode_bits(logs)
    assert s.avg_bits_pmpd == pytest.approx((3.5 + 3.0) / 2)


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.5, 0.7, 1.0])
def test_budget_plan_is_monotone_and_spends_the_budget(fraction: float) -> None:
    steps, batch = 13, 8
    g = high_fraction_plan(fraction, steps)
    assert np.all(np.diff(g) <= 0) and g.sum() == pytest.approx(fraction * steps)
    counts = high_counts(fraction, steps, batch)
    assert np.all(np.diff(counts) <= 0) and counts.min() >= 0 and counts.max() <= batch
    # whole sequences: the total is the budget rounded to the nearest sequence-step
    assert abs(counts.sum() - fraction * steps * batch) <= 0.5


def test_budget_counts_round_to_the_budget_for_any_shape() -> None:
    for steps in (1, 2, 7, 31):
        for batch in (1, 3, 24):
            for fraction in np.linspace(0, 1, 21):
                counts = high_counts(float(fraction), steps, batch)
                assert np.all(np.diff(counts) <= 0) and counts.min() >= 0 and counts.max() <= batch
                assert abs(counts.sum() - fraction * steps * batch) <= 0.5 + 1e-9


def _logits(top1: list[float], vocab: int = 16) -> torch.Tensor:
    """(B, vocab) logits whose softmax top-1 probability per row is the given value (>= 1/vocab)."""
    rows = []
    for p in top1:
        rest = (1 - p) / (vocab - 1)
        rows.append(np.log([p] + [rest] * (vocab - 1)))
    return torch.tensor(np.array(rows), dtype=torch.float32)


def test_budget_drops_the_most_confident_first() -> None:
    sched = BudgetSwitch(LADDER, gen_len=5, target_bits=3.5)
    sched.start(4)
    allowed = list(sched.plan)
    state = StepState(1, _logits([0.3, 0.9, 0.5, 0.8]), running=(True,) * 4)
    widths = sched.decode_bits(state)
    assert sum(w == 4 for w in widths) == allowed[0]
    order = [1, 3, 2, 0]  # most confident first
    assert all(widths[i] == 3 for i in order[: 4 - allowed[0]])


def test_budget_meets_its_target_in_a_generation() -> None:
    dec = Decoder(dummy_weights(SMALL, 2), LADDER.policy(), make_backend("reference"))
    prompts = [[i + 1, 2 * i + 3, 7] for i in range(6)]
    sched = BudgetSwitch(LADDER, gen_len=9, target_bits=3.4)
    out = generate(dec, prompts, 9, sched)
    planned = 3 + high_counts(0.4, 8, 6).sum() / (8 * 6)
    assert mean_decode_bits(out.decode_bits) == pytest.approx(planned)
    assert abs(planned - 3.4) <= 0.5 / (8 * 6) + 1e-12
    with pytest.raises(ValueError, match="target_bits"):
        BudgetSwitch(LADDER, gen_len=9, target_bits=4.5)


def test_confidence_threshold_is_mean_plus_k_sd_of_the_first_window() -> None:
    sched = ConfidenceSwitch(LADDER, k=1.0, window=2)
    sched.start(2)
    # row 0 sees 0.5, 0.7 (threshold 0.6 + 0.1414), row 1 sees 0.2, 0.2 (threshold 0.2)
    seq = [[0.5, 0.2], [0.7, 0.2], [0.74, 0.1], [0.75, 0.2], [0.1, 0.1]]
    got = [sched.decode_bits(StepState(s + 1, _logits(p))) for s, p in enumerate(seq)]
    assert sched.threshold is not None
    assert sched.threshold == pytest.approx([0.6 + np.std([0.5, 0.7], ddof=1), 0.2], abs=1e-6)
    # the window's passes never switch; row 1 reaches its threshold at step 4, row 0 too; both stay low
    assert got == [[4, 4], [4, 4], [4, 4], [3, 3], [3, 3]]
    with pytest.raises(ValueError, match="window"):
        ConfidenceSwitch(LADDER, window=1)


def test_random_switch_is_seeded_and_draws_candidates_only() -> None:
    state = StepState(1, running=(True,) * 200)
    a = RandomSwitch(LADDER, points=[0, 3, 6], seed=7)
    a.start(200)
    draws = a.choose(state)
    assert set(draws) <= {0, 3, 6} and len(set(draws)) == 3
    assert a.choose(state) == draws  # re-seeded each generation: forced and free runs agree
    prior = RandomSwitch(LADDER, points=[0, 3, 6], prior=[1.0, 0.0, 0.0]).choose(state)
    assert set(prior) == {0}
    with pytest.raises(ValueError, match="summing to 1"):
        RandomSwitch(LADDER, points=[0, 3], prior=[0.5, 0.6])
    rounded = [0.697917, 0.151042, 0.085938, 0.065104]  # a stored prior (6 decimals) sums to 1.000001
    assert set(RandomSwitch(LADDER, points=[0, 2, 4, 6], prior=rounded).choose(state)) <= {0, 2, 4, 6}
