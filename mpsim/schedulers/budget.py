"""The bit-budget scheduler (mpsim's own design): a batch meets a target average decode width.

Static and learned switch points say nothing about speed until the generation has run: the average
width of a batch depends on which prompts came in. A server sized for a throughput wants the
opposite guarantee: "this batch decodes at 3.5 bits on average", with the quality spent where it
matters. The budget scheduler plans, before decoding, how many sequences read the high width at
each decode step, a count that falls along a linear ramp whose area is the budget:

    fraction high at step t:  g(t) = clip((c - t + 1/2) / w, 0, 1),  t = 1..M  (M = gen_len - 1)
    w = 2 M min(f, 1 - f),  f = (target - low) / (high - low),  c such that sum_t g(t) = f M

so the plain mean width over the batch's decode passes is the target (up to rounding the count to
whole sequences). Early steps stay high (PMPD's observation: early tokens
matter most); when the plan says k sequences must drop, the k most confident drop, confidence being
a running average of each sequence's top-1 probability. Dropping is for good (monotone, one rung).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mpsim.engine.scheduler import Ladder, StepState
from mpsim.schedulers.baselines import top1_probability


def high_fraction_plan(fraction: float, steps: int) -> np.ndarray:
    """g(1..steps): the planned share of sequences at the high width, non-increasing, sum f*steps.

    The ramp's centre c is found by bisection so the discrete sum is the budget exactly (the
    closed form c = f M + w / 2 is exact only for the continuous ramp)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction: expected 0..1, got {fraction}")
    t = np.arange(1, steps + 1, dtype=float)
    w = 2 * steps * min(fraction, 1 - fraction)
    if w == 0:
        return np.full(steps, fraction)

    def plan(c: float) -> np.ndarray:
        return np.clip((c - t + 0.5) / w, 0.0, 1.0)

    lo, hi = 0.0, steps + w + 1.0
    for _ in range(100):  # sum(plan(c)) is continuous and non-decreasing in c
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if plan(mid).sum() < fraction * steps else (lo, mid)
    return plan((lo + hi) / 2)


def high_counts(fraction: float, steps: int, batch: int) -> np.ndarray:
    """Whole sequences at the high width per step: the plan's counts rounded down, then one more on
    the steps with the largest remainders (earlier first) until they sum to round(f * steps * batch).
    Within a run of equal rounded counts the remainders fall with t, so the counts stay monotone."""
    want = high_fraction_plan(fraction, steps) * batch
    base = np.floor(want + 1e-9).astype(int)
    extra = round(float(want.sum())) - int(base.sum())
    order = np.lexsort((np.arange(steps), -(want - base)))
    base[order[:extra]] += 1
    return base


@dataclass
class BudgetSwitch:
    """Keeps the batch's plain-mean decode width at `target_bits` (between the ladder's ends)."""

    ladder: Ladder
    gen_len: int
    target_bits: float
    smoothing: float = 0.5
    name: str = "budget"
    plan: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    ema: np.ndarray = field(default_factory=lambda: np.zeros(0))
    low: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __post_init__(self) -> None:
        lo, hi = self.ladder.low, self.ladder.high
        if not lo <= self.target_bits <= hi:
            raise ValueError(f"target_bits: expected {lo}..{hi} (the ladder's ends), got {self.target_bits}")

    @property
    def fraction(self) -> float:
        lo, hi = self.ladder.low, self.ladder.high
        return (self.target_bits - lo) / (hi - lo)

    def start(self, batch: int) -> None:
        self.plan = high_counts(self.fraction, max(0, self.gen_len - 1), batch)
        self.ema, self.low = np.zeros(0), np.zeros(batch, dtype=bool)

    def prefill_bits(self) -> int:
        return self.ladder.high

    def decode_bits(self, state: StepState) -> list[int]:
        if state.last_logits is None:
            raise ValueError("BudgetSwitch needs the previous pass's logits")
        p = top1_probability(state.last_logits)
        self.ema = p if state.step == 1 else self.smoothing * self.ema + (1 - self.smoothing) * p
        allowed = int(self.plan[min(state.step, len(self.plan)) - 1])
        running = np.asarray(state.running, dtype=bool) if state.running else np.ones(len(p), bool)
        high = np.flatnonzero(~self.low & running)
        excess = len(high) - allowed
        if excess > 0:  # drop the most confident; ties by index, so runs are deterministic
            order = high[np.lexsort((high, -self.ema[high]))]
            self.low[order[:excess]] = True
        return [self.ladder.low if lo else self.ladder.high for lo in self.low]
