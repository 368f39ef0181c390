"""The offline searches' rules, on stub runners with set qualities: static picks the smallest
candidate S that meets all-high's quality; phase-aware the cheapest pair; confidence the lowest
threshold. Plus prompt sets: seeded, disjoint validation and test text."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mpsim.engine.scheduler import Ladder
from mpsim.schedulers.baselines import ConfidenceSwitch, calibrate_confidence
from mpsim.schedulers.runs import RunScore, prompt_set
from mpsim.schedulers.static import (
    QualityTarget,
    read_cost,
    search_phase_aware,
    search_switch_point,
    static_scheduler,
)

LADDER = Ladder((4, 3))


class StubRunner:
    """Answers `fixed(spelling)` / `run(scheduler, policy)` with a set mean Rouge-L."""

    def __init__(self, quality: dict[Any, float], gen_len: int = 30) -> None:
        self.quality, self.gen_len = quality, gen_len

    def _score(self, key: Any) -> RunScore:
        q = np.full(4, self.quality[key])
        return RunScore(q, q, 4, [[4]])

    def fixed(self, spelling: str) -> RunScore:
        return self._score(spelling)

    def run(self, scheduler: ConfidenceSwitch, policy: Any) -> RunScore:
        return self._score(scheduler.k)


def test_static_picks_the_smallest_point_meeting_all_high() -> None:
    runner = StubRunner({"ap4": 0.8, "ap4-3": 0.6, "ap4-4@10-3": 0.81, "ap4-4@20-3": 0.7})
    choice = search_switch_point(runner, LADDER)  # type: ignore[arg-type]
    assert choice.switch == 10 and choice.goal == 0.8
    assert choice.quality == {0: 0.6, 10: 0.81, 20: 0.7, 30: 0.8}
    assert static_scheduler(choice, LADDER).switch == 10


def test_static_slack_lowers_the_target() -> None:
    runner = StubRunner({"ap4": 0.8, "ap4-3": 0.75, "ap4-4@10-3": 0.7, "ap4-4@20-3": 0.7})
    assert search_switch_point(runner, LADDER).switch == 30  # type: ignore[arg-type]
    assert search_switch_point(runner, LADDER, target=QualityTarget(slack=0.05)).switch == 0  # type: ignore[arg-type]


def test_static_with_more_segments() -> None:
    q = {"ap4": 0.8, "ap4-3": 0.1} | {f"ap4-4@{s}-3": 0.8 if s >= 12 else 0.5 for s in (6, 12, 18, 24)}
    assert search_switch_point(StubRunner(q), LADDER, segments=5).switch == 12  # type: ignore[arg-type]


def test_phase_aware_takes_the_cheapest_pair_that_meets_the_target() -> None:
    runner = StubRunner({"ap4": 0.8, "ap4-3": 0.8, "ap3": 0.79}, gen_len=10)
    choice = search_phase_aware(runner, LADDER)  # type: ignore[arg-type]
    assert choice.policy == "ap4-3"
    assert choice.cost[(4, 3)] == read_cost(4, 3, 10) == pytest.approx((4 + 9 * 3) / 10)
    assert choice.cost[(3, 3)] < choice.cost[(4, 3)] < choice.cost[(4, 4)]
    runner = StubRunner({"ap4": 0.8, "ap4-3": 0.7, "ap3": 0.9}, gen_len=10)
    assert search_phase_aware(runner, LADDER).policy == "ap3"  # type: ignore[arg-type]


def test_confidence_calibration_takes_the_lowest_k_meeting_the_target() -> None:
    grid = (0.0, 1.0, 2.0)
    runner = StubRunner({"ap4": 0.8, 0.0: 0.6, 1.0: 0.85, 2.0: 0.8})
    assert calibrate_confidence(runner, LADDER, grid=grid).k == 1.0  # type: ignore[arg-type]
    never = StubRunner({"ap4": 0.8, 0.0: 0.6, 1.0: 0.6, 2.0: 0.6})
    assert calibrate_confidence(never, LADDER, grid=grid).k is None  # type: ignore[arg-type]


def test_prompt_sets_are_seeded_and_validation_never_meets_test() -> None:
    val = prompt_set("val", 6, 16, 8, seed=3)
    again = prompt_set("val", 6, 16, 8, seed=3)
    test = prompt_set("test", 6, 16, 8, seed=3)
    assert val == again
    assert all(len(p) == 16 for p in val.prompts) and all(len(t) == 8 for t in val.targets)
    texts = {bytes(p + t) for p, t in zip(val.prompts, val.targets, strict=True)}
    assert not texts & {bytes(p + t) for p, t in zip(test.prompts, test.targets, strict=True)}
    with pytest.raises(ValueError, match="split"):
        prompt_set("dev", 2, 4, 4)
