"""An evaluation's settings (`mpsim evaluate`) and the check of all of them before any work starts.

Generations take most of an evaluation's time (seconds to hours), and a scheduler, hardware model,
budget or switch-point count that a later step would refuse is refused here instead, in well under
a second: `check_config` runs every check that needs no model (the command opens the model after it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpsim import limits
from mpsim.analysis.evaluate.schedulers import check_budget, check_scheduler
from mpsim.engine.scheduler import Ladder
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.policy import parse_policy
from mpsim.sim import check_model

METRICS = ("rouge_bytes", "rouge_words")


@dataclass(frozen=True)
class EvalConfig:
    policies: tuple[str, ...] = ("fp16", "ap4", "ap3", "ap4-3", "ap4-4@8-3")
    schedulers: tuple[str, ...] = ("static", "learned")
    hw: tuple[str, ...] = ("h200-sxm", "npu-llm")
    ladder: tuple[int, ...] | None = None  # default: highest and lowest ap widths of the policies
    prompt_len: int = 64
    gen_len: int = 32
    val_samples: int = 24
    test_samples: int = 24
    segments: int = 3
    metric: str = "rouge_bytes"
    slack: float = 0.0
    budget_bits: float | None = None
    perf_model: str = "sim"
    seed: int = 0


def ladder_of(cfg: EvalConfig) -> Ladder:
    if cfg.ladder is not None:
        for width in cfg.ladder:
            _named("--ladder", str(width), lambda w: parse_policy(f"ap{w}"))
        try:
            return Ladder(tuple(cfg.ladder))
        except ValueError as exc:
            raise MpsimInputError(f"--ladder {','.join(map(str, cfg.ladder))}: {exc}") from None
    widths = {b for p in cfg.policies for b in _ap_widths(p)}
    if len(widths) < 2:
        raise MpsimInputError(f"policies {list(cfg.policies)}: the schedulers switch between the highest and "
                              "lowest `ap` widths listed; list two (e.g. ap4,ap3) or give --ladder 4,3")
    return Ladder((max(widths), min(widths)))


def _ap_widths(spelling: str) -> list[int]:
    p = parse_policy(spelling)
    return [] if p.family != "anyprec" else [p.prefill_bits, *(b for _, b in p.decode_schedule)]


def check_config(cfg: EvalConfig) -> Ladder:
    """Every setting, named as its option, before any generation; returns the ladder."""
    for option, value in (("--prompt-len", cfg.prompt_len), ("--gen-len", cfg.gen_len),
                          ("--val-samples", cfg.val_samples), ("--test-samples", cfg.test_samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise MpsimInputError(f"{option}: expected an integer >= 1, got {value!r}")
        limits.SHAPE_DIM.check(value, option)
    if cfg.seed < 0:
        raise MpsimInputError(f"--seed: expected an integer >= 0, got {cfg.seed}")
    if not 1 <= cfg.segments <= cfg.gen_len:
        raise MpsimInputError(f"--segments: expected 1..{cfg.gen_len} (--gen-len: candidate switch points "
                              f"{{0, L/N, ..., L}}), got {cfg.segments}")
    if cfg.metric not in METRICS:
        raise MpsimInputError(f"--metric: expected one of {', '.join(METRICS)}, got {cfg.metric!r}")
    if not math.isfinite(cfg.slack):
        raise MpsimInputError(f"--slack: expected a finite number, got {cfg.slack!r}")
    for option, names in (("--policies", cfg.policies), ("--schedulers", cfg.schedulers), ("--hw", cfg.hw)):
        if not names:
            raise MpsimInputError(f"{option}: expected a comma-separated list of at least one name")
    for spelling in cfg.policies:
        _named("--policies", spelling, parse_policy)
    ladder = ladder_of(cfg)
    if cfg.budget_bits is not None:
        check_budget(cfg.budget_bits, ladder, "--budget-bits")
    for name in cfg.schedulers:
        _named("--schedulers", name, lambda n: check_scheduler(n, ladder))
    for hw in cfg.hw:
        _named("--hw", hw, load_hardware)
    _named("--perf-model", cfg.perf_model, check_model)
    return ladder


def _named(option: str, value: str, check: Callable[[str], Any]) -> None:
    try:
        check(value)
    except ValueError as exc:  # MpsimInputError, HardwareFileError: each names the bad value
        raise MpsimInputError(f"{option}: {exc}") from None
