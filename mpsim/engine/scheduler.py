"""Precision schedulers: the engine asks one, every decode step, which weight width to read.

PMPD's semantics: precision never rises during a generation and falls one step at a time; switch
points are counted in decode steps (step 1 is the first pass after prefill). The fixed scheduler
replays a policy's own switch points; the schedulers issue adds static, learned and others on the
same interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from mpsim.policy import Policy


@dataclass
class StepState:
    """What a scheduler may look at before decode step `step` (1-based)."""

    step: int
    last_logits: torch.Tensor | None = None  # (B, V) fp16 logits of the previous pass
    last_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # last layer's K/V after prefill


class Scheduler(Protocol):
    name: str

    def prefill_bits(self) -> int: ...
    def decode_bits(self, state: StepState) -> int: ...


@dataclass
class FixedScheduler:
    """The policy's own schedule: prefill at p bits, decode segments at their widths."""

    policy: Policy
    name: str = "fixed"
    log: list[int] = field(default_factory=list)

    def prefill_bits(self) -> int:
        return self.policy.prefill_bits

    def decode_bits(self, state: StepState) -> int:
        return self.policy.decode_bits(state.step)
