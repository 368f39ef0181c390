"""Baseline schedulers to hold the static and learned ones against: random switch points (uniform
over the candidates, or drawn from a prior such as the learned scheduler's label frequencies), and
PMPD's confidence-based scheduler, which drops a sequence's precision once the model is more sure of
itself than it was over its first passes.

Uniform low / uniform high need no scheduler: they are the fixed policies `ap{lo}` / `ap{hi}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from mpsim.engine.scheduler import Ladder, StepState, SwitchScheduler
from mpsim.schedulers.runs import Runner, mean_quality
from mpsim.schedulers.static import QualityTarget


@dataclass
class RandomSwitch(SwitchScheduler):
    """Each sequence's S drawn from `points` with probabilities `prior` (None: uniform).

    The generator is re-seeded at every generation's start, so a teacher-forced and a free run of
    the same prompts draw the same switch points.
    """

    points: Sequence[int] = ()
    prior: Sequence[float] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("RandomSwitch: expected at least one candidate switch point")
        if self.prior is not None:
            p = np.asarray(self.prior, dtype=float)
            if len(p) != len(self.points) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
                raise ValueError(f"RandomSwitch prior: expected {len(self.points)} probabilities "
                                 f"summing to 1, got {list(self.prior)}")

    def choose(self, state: StepState) -> list[int]:
        rng = np.random.default_rng(self.seed)
        n = len(state.running)
        # renormalized: a stored prior is rounded (6 decimals), numpy wants a sum within ~1e-8 of 1
        p = None if self.prior is None else np.asarray(self.prior, dtype=float) / np.sum(self.prior)
        return [int(s) for s in rng.choice(np.asarray(self.points), size=n, p=p)]


def top1_probability(logits: torch.Tensor) -> np.ndarray:
    """(B, V) logits -> (B,) probability of each row's argmax."""
    return torch.softmax(logits.float(), dim=-1).max(dim=-1).values.numpy()


@dataclass
class ConfidenceSwitch:
    """PMPD's confidence scheduler, per sequence: the top-1 probabilities of the first `window`
    passes set a threshold, their mean + k standard deviations; the sequence drops from high to low
    at the first later step whose top-1 probability reaches it, and stays low."""

    ladder: Ladder
    k: float = 1.0
    window: int = 8
    name: str = "confidence"
    scores: list[np.ndarray] = field(default_factory=list)
    threshold: np.ndarray | None = None
    low: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ValueError(f"window: expected >= 2 passes (a standard deviation), got {self.window}")

    def start(self, batch: int) -> None:
        self.scores, self.threshold, self.low = [], None, np.zeros(batch, dtype=bool)

    def prefill_bits(self) -> int:
        return self.ladder.high

    def decode_bits(self, state: StepState) -> list[int]:
        if state.last_logits is None:
            raise ValueError("ConfidenceSwitch needs the previous pass's logits")
        p = top1_probability(state.last_logits)
        if len(self.scores) < self.window:
            self.scores.append(p)
        else:
            if self.threshold is None:
                seen = np.stack(self.scores)
                self.threshold = seen.mean(axis=0) + self.k * seen.std(axis=0, ddof=1)
            self.low |= p >= self.threshold
        return [self.ladder.low if lo else self.ladder.high for lo in self.low]


CONFIDENCE_GRID = (-1.0, -0.5, 0.0, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class ConfidenceChoice:
    k: float | None  # None: no k on the grid met the target (never switch)
    goal: float
    quality: dict[float, float]


def calibrate_confidence(runner: Runner, ladder: Ladder, target: QualityTarget | None = None,
                         grid: Sequence[float] = CONFIDENCE_GRID, window: int = 8) -> ConfidenceChoice:
    """The lowest k (earliest switching) whose validation quality meets the target, the way the
    static scheduler picks its S (PMPD fixes k = 1; here it is calibrated like the others)."""
    target = target or QualityTarget()
    goal = target.goal(runner, ladder.high)
    policy = ladder.policy()
    quality = {k: mean_quality(runner.run(ConfidenceSwitch(ladder, k, window), policy), target.metric)
               for k in sorted(grid)}
    meeting = [k for k in sorted(grid) if quality[k] >= goal]
    return ConfidenceChoice(meeting[0] if meeting else None, goal, quality)
