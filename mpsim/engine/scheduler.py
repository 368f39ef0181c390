"""Precision schedulers: the engine asks one, every decode step, which weight width to read.

PMPD's semantics: precision never rises during a generation and falls one rung at a time down a
ladder of widths (4 -> 3, or 4 -> 3 -> 2); switch points are counted in decode steps (step 1 is the
first pass after prefill). A two-rung switch at S means decode passes 1..S read the high width and
S+1.. the low one: S = 0 is phase-aware decoding, S >= gen_len - 1 never switches. Candidate points
for a generation of L new tokens are {0, L/N, ..., L} (PMPD: N = 3).

A scheduler may answer one width for the batch or one per sequence (a list): the engine runs a
mixed pass per width and keeps each sequence's own rows (mpsim/engine/generate.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Protocol

import torch

from mpsim.policy import Policy, parse_policy


@dataclass
class StepState:
    """What a scheduler may look at before decode step `step` (1-based)."""

    step: int
    last_logits: torch.Tensor | None = None  # (B, V) fp16 logits of the previous pass
    last_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # last layer's K/V after prefill:
    # (B, kv_heads, T, head_dim) fp16 each (dequantized if the cache is), padded past prompt_lens
    prompt_lens: tuple[int, ...] = ()
    running: tuple[bool, ...] = ()  # False once a sequence has emitted EOS
    current: tuple[int, ...] = ()   # each sequence's width at the previous pass


Bits = int | Sequence[int]


class Scheduler(Protocol):
    name: str

    def start(self, batch: int) -> None: ...
    def prefill_bits(self) -> int: ...
    def decode_bits(self, state: StepState) -> Bits: ...


@dataclass
class FixedScheduler:
    """The policy's own schedule: prefill at p bits, decode segments at their widths."""

    policy: Policy
    name: str = "fixed"
    log: list[int] = field(default_factory=list)

    def start(self, batch: int) -> None:
        return None

    def prefill_bits(self) -> int:
        return self.policy.prefill_bits

    def decode_bits(self, state: StepState) -> int:
        return self.policy.decode_bits(state.step)


@dataclass(frozen=True)
class Ladder:
    """The widths a switching scheduler walks down, highest first (e.g. (4, 3))."""

    widths: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.widths) < 2 or any(b >= a for a, b in pairwise(self.widths)):
            raise ValueError(f"ladder: expected >= 2 strictly decreasing widths, got {self.widths}")

    @property
    def high(self) -> int:
        return self.widths[0]

    @property
    def low(self) -> int:
        return self.widths[-1]

    def policy(self) -> Policy:
        """A policy whose decoder stores every rung (the any-precision parent is the high width)."""
        return parse_policy(f"ap{self.high}-{self.low}")


def candidate_points(gen_len: int, segments: int = 3) -> list[int]:
    """PMPD's switch points {0, L/N, ..., L} (rounded) for L = gen_len new tokens."""
    if segments < 1 or segments > gen_len:
        raise ValueError(f"segments: expected 1..gen_len={gen_len}, got {segments}")
    return [round(i * gen_len / segments) for i in range(segments + 1)]


def switch_policy(ladder: Ladder, switch: int, gen_len: int) -> str:
    """The policy spelling of a two-rung switch after `switch` decode steps (for trace synthesis)."""
    hi, lo = ladder.high, ladder.low
    if switch <= 0:
        return f"ap{hi}-{lo}"
    if switch >= gen_len - 1:
        return f"ap{hi}"
    return f"ap{hi}-{hi}@{switch}-{lo}"


def log_policy(prefill: int, log: Sequence[int]) -> str:
    """The any-precision policy spelling that replays one sequence's widths (trace synthesis)."""
    runs: list[tuple[int, int]] = []  # (width, last decode step of the run)
    for step, b in enumerate(log, start=1):
        if runs and runs[-1][0] == b:
            runs[-1] = (b, step)
        else:
            runs.append((b, step))
    if not runs or (len(runs) == 1 and runs[0][0] == prefill):
        return f"ap{prefill}"
    text = f"ap{prefill}-{runs[0][0]}"
    for (_, end), (b, _) in pairwise(runs):
        text += f"@{end}-{b}"
    return text


def switch_step(log: Sequence[int], high: int) -> int:
    """Decode steps a sequence read at `high` before its first drop (its switch point S)."""
    n = 0
    for b in log:
        if b != high:
            break
        n += 1
    return n


def check_schedule(prefill: int, log: Sequence[int], ladder: Ladder | None = None) -> None:
    """Raise unless a sequence's widths never rise (and, given a ladder, fall one rung at a time)."""
    widths = [prefill, *log]
    for step, (a, b) in enumerate(pairwise(widths), start=1):
        if b > a:
            raise ValueError(f"decode step {step}: width rose from {a} to {b} bits; schedules are monotone")
        if ladder is None or a == b:
            continue
        if a not in ladder.widths or b not in ladder.widths:
            raise ValueError(f"decode step {step}: {a} -> {b} bits leaves the ladder {ladder.widths}")
        if ladder.widths.index(b) != ladder.widths.index(a) + 1:
            raise ValueError(f"decode step {step}: {a} -> {b} skips a rung of {ladder.widths}")


@dataclass
class SwitchScheduler:
    """Two-rung switching with one switch point per sequence, decided by `choose` at step 1.

    Subclasses implement `choose(state) -> list[int]` (the S of every sequence); this base turns
    them into widths: `high` for steps 1..S, `low` after. Prefill reads the high width.
    """

    ladder: Ladder
    name: str = "switch"
    switch_at: list[int] = field(default_factory=list)

    def start(self, batch: int) -> None:
        self.switch_at = []

    def prefill_bits(self) -> int:
        return self.ladder.high

    def decode_bits(self, state: StepState) -> list[int]:
        if not self.switch_at:
            self.switch_at = [int(s) for s in self.choose(state)]
        return [self.ladder.high if state.step <= s else self.ladder.low for s in self.switch_at]

    def choose(self, state: StepState) -> list[int]:
        raise NotImplementedError(f"{type(self).__name__} must implement choose()")


@dataclass
class ConstantSwitch(SwitchScheduler):
    """Every sequence switches after the same S decode steps (what the static scheduler applies)."""

    switch: int = 0

    def choose(self, state: StepState) -> list[int]:
        return [self.switch] * _batch(state)


def _batch(state: StepState) -> int:
    if state.running:
        return len(state.running)
    if state.last_logits is not None:
        return int(state.last_logits.shape[0])
    raise ValueError("StepState: neither `running` nor `last_logits` tells the batch size")
