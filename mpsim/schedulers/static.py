"""Offline searches on a validation set: the static (task-adaptive) switch point and the phase-aware
(prefill bits, decode bits) pair.

The quality target is the validation quality of staying at the high width (uniform high, `ap{hi}`)
minus an optional slack: PMPD's rule is "matches all-high" (slack 0). Quality is mean Rouge-L
against fp16's continuation (bytes by default).

- Static: among the candidate points {0, L/N, ..., L} the smallest S that meets the target; S = L
  (never switch) always does when the slack is >= 0.
- Phase-aware: among pairs p >= d of the ladder's widths, the cheapest that meets the target, cost
  being the weight bits a generation reads per new token, (p + (L - 1) d) / L: one prefill pass and
  L - 1 decode passes each read every decoder-block weight once. Ties go to the better quality.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpsim.engine.scheduler import ConstantSwitch, Ladder, candidate_points, switch_policy
from mpsim.schedulers.runs import Runner, mean_quality


@dataclass(frozen=True)
class QualityTarget:
    metric: str = "rouge_bytes"
    slack: float = 0.0  # absolute: the target is quality(all-high) - slack

    def goal(self, runner: Runner, high: int) -> float:
        return mean_quality(runner.fixed(f"ap{high}"), self.metric) - self.slack


@dataclass(frozen=True)
class StaticChoice:
    switch: int
    goal: float
    quality: dict[int, float] = field(default_factory=dict)  # candidate S -> validation quality


def search_switch_point(runner: Runner, ladder: Ladder, segments: int = 3,
                        target: QualityTarget | None = None) -> StaticChoice:
    """The smallest candidate S whose validation quality meets the target."""
    target = target or QualityTarget()
    goal = target.goal(runner, ladder.high)
    points = candidate_points(runner.gen_len, segments)
    quality = {s: mean_quality(runner.fixed(switch_policy(ladder, s, runner.gen_len)), target.metric)
               for s in points}
    meeting = [s for s in points if quality[s] >= goal]
    return StaticChoice(min(meeting) if meeting else points[-1], goal, quality)


def static_scheduler(choice: StaticChoice, ladder: Ladder) -> ConstantSwitch:
    return ConstantSwitch(ladder, name="static", switch=choice.switch)


@dataclass(frozen=True)
class PhaseChoice:
    prefill_bits: int
    decode_bits: int
    goal: float
    quality: dict[tuple[int, int], float] = field(default_factory=dict)
    cost: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def policy(self) -> str:
        return phase_spelling(self.prefill_bits, self.decode_bits)


def phase_spelling(prefill: int, decode: int) -> str:
    return f"ap{prefill}" if prefill == decode else f"ap{prefill}-{decode}"


def read_cost(prefill: int, decode: int, gen_len: int) -> float:
    """Weight bits read per new token: one prefill pass, gen_len - 1 decode passes."""
    return (prefill + (gen_len - 1) * decode) / gen_len


def search_phase_aware(runner: Runner, ladder: Ladder, target: QualityTarget | None = None) -> PhaseChoice:
    """The cheapest (prefill, decode) pair of ladder widths (p >= d) that meets the target."""
    target = target or QualityTarget()
    goal = target.goal(runner, ladder.high)
    pairs = [(p, d) for p in ladder.widths for d in ladder.widths if d <= p]
    quality = {(p, d): mean_quality(runner.fixed(phase_spelling(p, d)), target.metric) for p, d in pairs}
    cost = {pd: read_cost(*pd, runner.gen_len) for pd in pairs}
    meeting = [pd for pd in pairs if quality[pd] >= goal] or [(ladder.high, ladder.high)]
    best = min(meeting, key=lambda pd: (cost[pd], -quality[pd]))
    return PhaseChoice(best[0], best[1], goal, quality, cost)
