"""The schedulers an evaluation can name, each turned into a table entry on the test prompts.

A name maps to a builder (a registry; an unknown name lists the valid ones). Searches and
calibrations run on the validation prompts and are recorded in `ctx.choices`; only the test run
of the chosen scheduler enters the table. Every scheduler switches down the same ladder (by default
the highest and lowest `ap` widths of the evaluated policies), and every sequence's widths are
checked against PMPD's semantics (monotone, one rung at a time) before they are timed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpsim.engine.scheduler import (
    Ladder,
    Scheduler,
    StepState,
    SwitchScheduler,
    candidate_points,
    check_schedule,
    log_policy,
    switch_policy,
    switch_step,
)
from mpsim.errors import MpsimInputError
from mpsim.schedulers.baselines import ConfidenceSwitch, RandomSwitch, calibrate_confidence
from mpsim.schedulers.budget import BudgetSwitch
from mpsim.schedulers.learned import KVClassifier, learned_scheduler, load_classifier
from mpsim.schedulers.runs import Runner, RunScore
from mpsim.schedulers.static import QualityTarget, search_phase_aware, search_switch_point, static_scheduler
from mpsim.schedulers.train import labels_from_quality


@dataclass
class Entry:
    label: str
    kind: str          # policy | search | scheduler | reference
    detail: str
    score: RunScore
    spellings: list[str]  # per sequence: the policy that replays its widths (for speed)


@dataclass
class Context:
    ladder: Ladder
    val: Runner
    test: Runner
    target: QualityTarget
    segments: int = 3
    budget_bits: float | None = None
    learned_dir: Path | None = None
    seed: int = 0
    choices: dict[str, Any] = field(default_factory=dict)
    switches: dict[str, list[int]] = field(default_factory=dict)  # scheduler -> S per test prompt
    _learned: tuple[KVClassifier, dict[str, Any]] | None = None

    @property
    def points(self) -> list[int]:
        return candidate_points(self.test.gen_len, self.segments)

    def learned(self) -> tuple[KVClassifier, dict[str, Any]]:
        if self._learned is None:
            if self.learned_dir is None:
                raise MpsimInputError("the learned scheduler needs a classifier folder")
            self._learned = load_classifier(self.learned_dir)
        return self._learned


def fixed_entry(ctx: Context, spelling: str, label: str | None = None, kind: str = "policy",
                detail: str = "") -> Entry:
    score = ctx.test.fixed(spelling)
    return Entry(label or spelling, kind, detail or spelling, score, [spelling] * len(score.bits))


def scheduler_entry(ctx: Context, sched: Scheduler, label: str, detail: str) -> Entry:
    score = ctx.test.run(sched, ctx.ladder.policy())
    for log in score.bits:
        check_schedule(score.prefill_bits, log, ctx.ladder)
    ctx.switches[label] = [switch_step(log, ctx.ladder.high) for log in score.bits]
    return Entry(label, "scheduler", detail, score, [log_policy(score.prefill_bits, b) for b in score.bits])


def _uniform(which: str) -> Callable[[Context], Entry]:
    def build(ctx: Context) -> Entry:
        bits = ctx.ladder.high if which == "high" else ctx.ladder.low
        return fixed_entry(ctx, f"ap{bits}", kind="policy", detail=f"uniform {which}: ap{bits}")
    return build


def _phase_aware(ctx: Context) -> Entry:
    c = search_phase_aware(ctx.val, ctx.ladder, ctx.target)
    ctx.choices["phase-aware"] = {"policy": c.policy, "goal": c.goal,
                                  "quality": {f"ap{p}-{d}": q for (p, d), q in c.quality.items()},
                                  "read_bits_per_token": {f"ap{p}-{d}": v for (p, d), v in c.cost.items()}}
    return fixed_entry(ctx, c.policy, "phase-aware", "search", f"{c.policy} (validation search)")


def _static(ctx: Context) -> Entry:
    c = search_switch_point(ctx.val, ctx.ladder, ctx.segments, ctx.target)
    ctx.choices["static"] = {"switch": c.switch, "goal": c.goal, "quality": c.quality}
    return scheduler_entry(ctx, static_scheduler(c, ctx.ladder), "static", f"S={c.switch} (validation)")


def _learned(ctx: Context) -> Entry:
    model, record = ctx.learned()
    ctx.choices["learned"] = {k: record.get(k) for k in ("class_prior", "accuracy_heldout",
                                                          "majority_class_heldout", "label_counts")}
    sched = learned_scheduler(model, ctx.ladder, ctx.test.gen_len)
    return scheduler_entry(ctx, sched, "learned", "K/V classifier, once per prompt")


def _random(ctx: Context) -> Entry:
    sched = RandomSwitch(ctx.ladder, name="random", points=ctx.points, seed=ctx.seed)
    return scheduler_entry(ctx, sched, "random", "S uniform over the candidates")


def _random_prior(ctx: Context) -> Entry:
    prior = [float(p) for p in ctx.learned()[1]["class_prior"]]
    if len(prior) != len(ctx.points):
        raise MpsimInputError(f"the classifier's prior has {len(prior)} classes; the evaluation has "
                              f"{len(ctx.points)} candidate points (--segments)")
    sched = RandomSwitch(ctx.ladder, name="random-prior", points=ctx.points, prior=prior, seed=ctx.seed)
    return scheduler_entry(ctx, sched, "random-prior", "S drawn from the learned labels' prior")


def _confidence(ctx: Context) -> Entry:
    window = max(2, ctx.test.gen_len // 4)
    c = calibrate_confidence(ctx.val, ctx.ladder, ctx.target, window=window)
    ctx.choices["confidence"] = {"k": c.k, "window": window, "goal": c.goal, "quality": c.quality}
    if c.k is None:
        return fixed_entry(ctx, f"ap{ctx.ladder.high}", "confidence", "scheduler",
                           "no k met the target on validation: never switches")
    sched = ConfidenceSwitch(ctx.ladder, c.k, window)
    return scheduler_entry(ctx, sched, "confidence", f"top-1 >= mean + {c.k:g} sd of first {window}")


def _budget(ctx: Context, target: float | None = None, label: str = "budget") -> Entry:
    hi, lo = ctx.ladder.high, ctx.ladder.low
    if target is None:
        target = ctx.budget_bits if ctx.budget_bits is not None else (hi + lo) / 2
    ctx.choices[label] = {"target_bits": target}
    sched = BudgetSwitch(ctx.ladder, ctx.test.gen_len, target)
    return scheduler_entry(ctx, sched, label, f"batch mean {target:g} bits")


@dataclass
class _Given(SwitchScheduler):
    given: list[int] = field(default_factory=list)

    def choose(self, state: StepState) -> list[int]:
        return list(self.given)


def quality_by_switch_point(ctx: Context) -> np.ndarray:
    """(test prompts, candidate points) Rouge-L of each fixed switch point on the test prompts."""
    cols = [ctx.test.fixed(switch_policy(ctx.ladder, s, ctx.test.gen_len)) for s in ctx.points]
    metric = ctx.target.metric
    return np.stack([c.rouge_bytes if metric == "rouge_bytes" else c.rouge_words for c in cols], axis=1)


def _oracle(ctx: Context) -> Entry:
    labels = labels_from_quality(quality_by_switch_point(ctx))
    sched = _Given(ctx.ladder, name="oracle", given=[ctx.points[c] for c in labels])
    entry = scheduler_entry(ctx, sched, "oracle", "test labels (upper reference, not a scheduler)")
    entry.kind = "reference"
    return entry


BUILDERS: dict[str, Callable[[Context], Entry]] = {
    "uniform-high": _uniform("high"), "uniform-low": _uniform("low"), "phase-aware": _phase_aware,
    "static": _static, "learned": _learned, "random": _random, "random-prior": _random_prior,
    "confidence": _confidence, "budget": _budget, "oracle": _oracle,
}


def check_scheduler_name(name: str) -> float | None:
    """A registered name (None), or `budget@B` (its target B bits); anything else is an error."""
    if name.startswith("budget@"):
        try:
            target = float(name.split("@", 1)[1])
        except ValueError:
            target = math.nan
        if not math.isfinite(target) or target <= 0:
            raise MpsimInputError(f"scheduler {name!r}: expected budget@BITS, e.g. budget@3.25")
        return target
    if name not in BUILDERS:
        raise MpsimInputError(f"unknown scheduler {name!r}; valid: {', '.join(BUILDERS)}, budget@BITS")
    return None


def build_entry(ctx: Context, name: str) -> Entry:
    """A registered name, or `budget@B` for a budget scheduler with target B bits."""
    target = check_scheduler_name(name)
    if target is not None:
        return _budget(ctx, target, name)
    return BUILDERS[name](ctx)
