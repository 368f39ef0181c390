"""The model's context length, and the one rule every request meets against it.

The rule is mpsim/workload.py's `check_context` (the one synth, simulate and sweep use): a request
whose prompt_len + gen_len exceeds the model spec's `max_context_len` (its config.json's
`max_position_embeddings`, with the source in the spec) is an error, or with
`--allow-beyond-context` a warning; here it is applied per request, the message naming where the
request came from (an option, a CSV row).
"""

from __future__ import annotations

import numpy as np

from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.workload import check_context as workload_rule


def context_length(spec: ModelSpec) -> int | None:
    return spec.max_context_len


def check_context(spec: ModelSpec, prompt_len: int, gen_len: int, allow_beyond: bool = False,
                  where: str = "") -> str | None:
    """None when the request fits; past the context an error naming `where`, or with
    `allow_beyond` the warning to show."""
    place = f"{where}: " if where else ""
    try:
        message = workload_rule(spec, prompt_len, gen_len, allow_beyond=allow_beyond)
    except MpsimInputError as exc:
        raise MpsimInputError(f"{place}{exc}") from None
    return None if message is None else place + message


def count_beyond(spec: ModelSpec, prompt_len: np.ndarray, gen_len: np.ndarray) -> int:
    """How many requests exceed the context (run anyway under --allow-beyond-context)."""
    limit = context_length(spec)
    return 0 if limit is None else int((prompt_len + gen_len > limit).sum())
