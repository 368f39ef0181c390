"""Each sequence's weight precision per decode step, and a batch's precision groups.

A sequence follows the policy's schedule (prefill at the prefill width, decode step s at
`policy.decode_bits(s)`), or, for a progressive policy with one switch (`ap{p}-{d1}@{S}-{d2}`), its
own switch point: decode steps 1..S at d1, then d2 (a `switch_step` from the arrivals CSV, or drawn
from a scheduler's distribution). The weight choices a run can use are numbered (groups); an
iteration's tokens are grouped by them: one GEMM launch per group (`per-group`), or every token at
the highest precision present (`highest`).
"""

from __future__ import annotations

import numpy as np

from mpsim.errors import MpsimInputError
from mpsim.policy import Policy, WeightChoice
from mpsim.serve.arrivals import NO_SWITCH


class PrecisionPlan:
    def __init__(self, policy: Policy, switch_step: np.ndarray, mixed: str = "per-group") -> None:
        self.policy, self.mixed = policy, mixed
        firsts = np.array([s for s, _ in policy.decode_schedule], dtype=np.int64)
        widths = [b for _, b in policy.decode_schedule]
        self.choices: list[WeightChoice] = []
        self.prefill_group = self._group(policy.weights_at("prefill", 0))
        self.decode_groups = np.array([self._group(policy.weights_at("decode", int(s))) for s in firsts],
                                      dtype=np.int64)
        self.firsts = firsts
        own = switch_step != NO_SWITCH
        if own.any() and len(widths) != 2:
            raise MpsimInputError(
                f"policy {policy}: a per-request switch_step needs a progressive policy with one "
                f"switch (ap{{p}}-{{d1}}@{{S}}-{{d2}}); this one decodes at {widths}")
        # per sequence: decode steps 1..switch at the first width (2-width policies only)
        default = int(firsts[1]) - 1 if len(widths) == 2 else 0
        self.switch = np.where(own, switch_step, default).astype(np.int64)
        self.two_widths = len(widths) == 2

    def _group(self, w: WeightChoice) -> int:
        if w not in self.choices:
            self.choices.append(w)
        return self.choices.index(w)

    def bits(self, group: int) -> int:
        return self.choices[group].bits

    def decode_group_of(self, rids: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """The weight group of decode step `steps[i]` (1-based) of request `rids[i]`."""
        if len(self.firsts) == 1:
            return np.full(len(rids), self.decode_groups[0], dtype=np.int64)
        if self.two_widths:
            return np.where(steps <= self.switch[rids], self.decode_groups[0], self.decode_groups[1])
        return self.decode_groups[np.searchsorted(self.firsts, steps, side="right") - 1]

    def token_groups(self, decode_groups: np.ndarray, prefill_tokens: int) -> tuple[tuple[int, int], ...]:
        """(group, tokens) of an iteration's linear layers, by group number; `highest` merges all."""
        counts = np.bincount(decode_groups, minlength=len(self.choices)) if len(decode_groups) else \
            np.zeros(len(self.choices), dtype=np.int64)
        counts[self.prefill_group] += prefill_tokens
        present = [(g, int(c)) for g, c in enumerate(counts) if c > 0]
        if self.mixed == "highest" and len(present) > 1:
            top = max(present, key=lambda gc: self.bits(gc[0]))[0]
            return ((top, sum(c for _, c in present)),)
        return tuple(present)
