"""A workload: how long the prompt is, how many tokens to generate, how many sequences at once."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mpsim.errors import MpsimInputError


@dataclass(frozen=True)
class Workload:
    prompt_len: int
    gen_len: int
    batch: int = 1

    def __post_init__(self) -> None:
        for key in ("prompt_len", "gen_len", "batch"):
            if getattr(self, key) < 1:
                raise MpsimInputError(f"workload {key} must be >= 1, got {getattr(self, key)}")

    @property
    def decode_steps(self) -> int:
        """Decode passes: the prefill pass yields the first new token, each decode pass one more."""
        return self.gen_len - 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
