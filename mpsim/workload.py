"""A workload: how long the prompt is, how many tokens to generate, how many sequences at once.

The context rule lives here, one function for every caller (synth, simulate, sweep; a serving
simulator per request): `check_context(spec, prompt_len, gen_len, allow_beyond=...)`. A sequence
holds prompt_len + gen_len tokens at its end; past the model's context length (ModelSpec
.max_context_len, from its config.json) the rule is an error, or with `allow_beyond` a warning the
caller shows. `check_size` refuses a workload whose trace could not be held in memory, with one
clear error instead of a MemoryError or an overflow deep inside.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.models import PRESETS, ModelSpec

BEYOND_CONTEXT_FLAG = "--allow-beyond-context"


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

    @property
    def tokens(self) -> int:
        """Tokens a sequence holds at its end: the prompt plus every new token."""
        return self.prompt_len + self.gen_len

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def beyond_context(spec: ModelSpec | Mapping[str, Any], prompt_len: int, gen_len: int) -> str | None:
    """Why prompt_len + gen_len does not fit the model's context, or None when it fits (or the
    model's context length is not known). `spec` is a ModelSpec or its dict (a trace's metadata;
    one written before specs carried a context length gets its preset's, by name)."""
    name, limit, source = _context_of(spec)
    tokens = prompt_len + gen_len
    if limit is None or tokens <= limit:
        return None
    return (f"prompt {prompt_len:,} + {gen_len:,} new tokens = {tokens:,} tokens exceeds the context "
            f"length of {name} ({limit:,} tokens, {source or 'its config'})")


def _context_of(spec: ModelSpec | Mapping[str, Any]) -> tuple[str, int | None, str]:
    if isinstance(spec, ModelSpec):
        return spec.name, spec.max_context_len, spec.context_source
    name = str(spec.get("name") or "the model")
    if spec.get("max_context_len") is None and name in PRESETS:
        return _context_of(PRESETS[name])
    limit = spec.get("max_context_len")
    return name, None if limit is None else int(limit), str(spec.get("context_source") or "")


def check_context(spec: ModelSpec | Mapping[str, Any], prompt_len: int, gen_len: int, *,
                  allow_beyond: bool = False) -> str | None:
    """The context rule: an MpsimInputError past the model's context length; with `allow_beyond`,
    the warning for the caller to show instead (None when the workload fits)."""
    reason = beyond_context(spec, prompt_len, gen_len)
    if reason is not None and not allow_beyond:
        raise MpsimInputError(f"{reason}; pass {BEYOND_CONTEXT_FLAG} to run it anyway")
    return None if reason is None else f"{reason}; running it anyway ({BEYOND_CONTEXT_FLAG})"


# A launch held in a synthesized trace costs ~135 bytes (narrow columns); building it briefly needs
# about twice that. A workload whose launches would not fit the machine's memory is refused up front.
BYTES_PER_LAUNCH = 300


def check_size(launches_per_pass: int, workload: Workload) -> None:
    """Refuse a workload whose trace (one pass per step: prefill + gen_len - 1 decode passes) could
    not be held in this machine's memory."""
    launches = launches_per_pass * workload.gen_len
    need, have = launches * BYTES_PER_LAUNCH, _memory_bytes()
    if have is not None and need > have:
        raise MpsimInputError(
            f"the workload is too large: prompt {workload.prompt_len:,}, {workload.gen_len:,} new tokens "
            f"would make {launches:,} launches (~{need / 1e9:,.0f} GB to synthesize, this machine has "
            f"{have / 1e9:,.0f} GB); generate fewer tokens")


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None
