"""The spec's `exclude` key: holes in the grid, as GitHub Actions' matrix `exclude` makes them.

Each entry is a mapping of one or more of `model`, `policy`, `engine`, `hardware` to one name; a
point (trace or serve) is left out when every key its entry gives matches it. Typical use: a policy
whose launches need tensor rates a device does not list (fp8 on npu-edge or on A100), which the sweep
otherwise refuses before any work (analysis/sweep/support.py). An entry may name only values the spec
lists (a misspelt one would silently exclude nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.policy import parse_policy

EXCLUDE_KEYS = ("model", "policy", "engine", "hardware")


@dataclass(frozen=True)
class Exclusion:
    """One `exclude` entry: the names it pins (None: any)."""

    model: str | None = None
    policy: str | None = None  # canonical spelling (mpsim.policy)
    engine: str | None = None
    hardware: str | None = None

    def matches(self, model: str, policy: str, engine: str, hardware: str) -> bool:
        return all(want is None or want == have for want, have in (
            (self.model, model), (self.policy, policy), (self.engine, engine), (self.hardware, hardware)))

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("model", self.model), ("policy", self.policy), ("engine", self.engine),
                                  ("hardware", self.hardware)) if v is not None}

    def __str__(self) -> str:
        """'policy fp8, hardware npu-edge': the names it pins."""
        return ", ".join(f"{k} {v}" for k, v in self.as_dict().items())


def parse_exclude(source: str, value: Any, listed: dict[str, tuple[str, ...]]) -> tuple[Exclusion, ...]:
    """The `exclude` list; `listed` maps each key to the names the spec lists for it."""
    if not isinstance(value, list) or not value:
        raise MpsimInputError(f"{source}: exclude: expected a non-empty list of mappings with keys from "
                              f"{', '.join(EXCLUDE_KEYS)}, got {value!r}")
    out = []
    for i, item in enumerate(value):
        where = f"{source}: exclude[{i}]"
        if not isinstance(item, dict) or not item:
            raise MpsimInputError(f"{where}: expected a mapping with keys from {', '.join(EXCLUDE_KEYS)}, "
                                  f"got {item!r}")
        names: dict[str, str] = {}
        for key, name in item.items():
            if key not in EXCLUDE_KEYS:
                raise MpsimInputError(f"{where}.{key}: unknown key; expected one of: "
                                      f"{', '.join(EXCLUDE_KEYS)}")
            if not isinstance(name, str):
                raise MpsimInputError(f"{where}.{key}: expected one name (a string), got {name!r}")
            if key == "policy":
                try:
                    name = parse_policy(name).spelling
                except MpsimInputError as exc:
                    raise MpsimInputError(f"{where}.policy: {exc}") from None
            if name not in listed[key]:
                raise MpsimInputError(f"{where}.{key}: {name!r} is not in the spec's {_plural(key)} "
                                      f"({', '.join(listed[key])})")
            names[key] = name
        out.append(Exclusion(**names))
    return tuple(out)


def excluded(rules: tuple[Exclusion, ...], model: str, policy: str, engine: str, hardware: str) -> bool:
    return any(r.matches(model, policy, engine, hardware) for r in rules)


def _plural(key: str) -> str:
    return {"hardware": "hardware", "policy": "policies"}.get(key, f"{key}s")
