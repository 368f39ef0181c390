"""Stated limits on sizes: what mpsim refuses before it allocates or loops (docs/inputs.md).

A size past its limit is almost always a typo (`--requests 1000000000`, a config.json with 10^6
layers, a measured row with m = 1e11) and would otherwise exhaust memory or run for hours; it is
refused with one error naming the value, the limit and how to raise it. Each limit a user could
mean to pass is overridable by an environment variable (a positive whole number).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mpsim.errors import MpsimInputError


@dataclass(frozen=True)
class Limit:
    """One stated limit: `default`, raised or lowered by the environment variable `env`."""

    env: str
    default: int
    what: str  # the unit counted, e.g. "requests"

    def value(self) -> int:
        raw = os.environ.get(self.env)
        if raw is None or raw.strip() == "":
            return self.default
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise MpsimInputError(f"{self.env}={raw!r}: expected a whole number >= 1")
        return value

    def check(self, value: float, where: str) -> None:
        """Raise if `value` exceeds the limit; `where` names the file, row, key or option."""
        limit = self.value()
        if value > limit:
            raise MpsimInputError(f"{where}: {value:,} {self.what} exceeds the limit of {limit:,} "
                                  f"(set {self.env} to raise it)")


REQUESTS = Limit("MPSIM_MAX_REQUESTS", 1_000_000, "requests")
"""Requests of one serving run (`mpsim serve --requests`, --rate x --duration, an arrivals CSV)."""

SWEEP_POINTS = Limit("MPSIM_MAX_SWEEP_POINTS", 100_000, "points")
"""Points of one sweep grid (models x policies x hardware x workloads x perf models)."""

LAYERS = Limit("MPSIM_MAX_LAYERS", 1_000, "layers")
"""Decoder layers of a model (config.json num_hidden_layers); the largest published have ~130."""

SHAPE_DIM = Limit("MPSIM_MAX_SHAPE_DIM", 1 << 24, "elements")
"""One dimension of a launch (m, n, k, batch, q_len, kv_len, heads, head_dim, tokens, hidden) and
of a model (hidden_size, intermediate_size, vocab_size, heads)."""

GRID_CTAS = Limit("MPSIM_MAX_GRID_CTAS", 1 << 26, "thread blocks")
"""Thread blocks (CTAs) of one launch's grid: the simulator's work grows with them."""

TEMPLATE_CHARS = Limit("MPSIM_MAX_TEMPLATE_CHARS", 1 << 20, "characters")
"""Characters a chat template may render for one prompt (the prompt itself included)."""

TEMPLATE_SECONDS = Limit("MPSIM_MAX_TEMPLATE_SECONDS", 5, "seconds")
"""Wall-clock seconds one chat template render may take."""

ALL = (REQUESTS, SWEEP_POINTS, LAYERS, SHAPE_DIM, GRID_CTAS, TEMPLATE_CHARS, TEMPLATE_SECONDS)
