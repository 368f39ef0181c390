"""Shared helpers of the serving tests (tests/serve/, tests/analysis/): small, fast runs (the roofline
prices the queueing tests)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.arrivals import Requests, generate, parse_lengths
from mpsim.serve.config import SchedulerConfig, ServeConfig
from mpsim.serve.engine import ServeResult, run_serve
from mpsim.serve.pricing import IterationPricer


def requests(model: str = "mobilellama-1.4b", rate: float = 100.0, n: int = 200, prompt: Any = 256,
             gen: Any = 64, seed: int = 0, **kw: Any) -> Requests:
    return generate(get_model(model), rate=rate, requests=n, prompt=parse_lengths(prompt, "prompt"),
                    gen=parse_lengths(gen, "gen"), seed=seed, **kw)


def together(reqs: Requests) -> Requests:
    """The same requests, all arriving at 0 s (a closed batch)."""
    return replace(reqs, arrival_s=np.zeros(len(reqs)))


def serve(reqs: Requests, model: str = "mobilellama-1.4b", policy: str = "fp16", hw: str = "h200-sxm",
          perf_model: str = "roofline", pricer: IterationPricer | None = None, audit_every: int = 0,
          pricing: str = "auto", **sched: Any) -> ServeResult:
    cfg = ServeConfig(scheduler=SchedulerConfig(**sched), perf_model=perf_model, pricing=pricing)
    return run_serve(get_model(model), parse_policy(policy), load_hardware(hw), reqs, cfg, pricer=pricer,
                     audit_every=audit_every)
