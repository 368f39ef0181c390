"""Which (policy, engine, hardware) pairs of a sweep a device can run, checked before any point runs.

A policy's launches name the tensor rates they need (fp8 activations on fp8 tensor cores, ...); a
device whose hardware file lists none for that dtype cannot run it (A100 has no fp8 tensor cores,
npu-edge no fp8 MACs). Without this check the sweep would stop at the first such point, after the
points before it. The probe synthesizes a one-layer copy of the spec's first model (prompt 16, 2 new
tokens, batch 1: the same kernels and dtypes as any workload) and prices it with the roofline, which
reads every launch's matrix dtype as the simulator does (mpsim/sim/roofline.py). A pair the spec
does not exclude is the spec's error, naming each pair, the device's reason and the `exclude` entry
that would leave it out.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from mpsim.analysis.sweep.spec import SweepSpec
from mpsim.engines import DEFAULT_ENGINE, MPSIM_KERNELS, EngineChoice
from mpsim.errors import MpsimInputError
from mpsim.hw_models.base import UnsupportedDtypeError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.synth import synthesize
from mpsim.traces.trace import Trace
from mpsim.workload import Workload

PROBE = Workload(prompt_len=16, gen_len=2, batch=1)


def unsupported_pairs(spec: SweepSpec) -> list[tuple[str, str, str, str]]:
    """(policy, engine, hardware, reason) for every pair some model of the spec would run on a device
    that cannot run it (pairs excluded for every model are not probed)."""
    model = dataclasses.replace(spec.models[0], num_layers=1)
    out = []
    for policy in spec.policies:
        for engine in spec.engines:
            for name, hw in spec.hardware.items():
                if all(spec.excludes(m.name, policy, engine, name) for m in spec.models):
                    continue
                reason = _reason(model, policy, engine, hw)
                if reason:
                    out.append((policy, engine, name, reason))
    return out


def check_support(spec: SweepSpec) -> None:
    """One MpsimInputError listing every unsupported pair the spec does not exclude."""
    pairs = unsupported_pairs(spec)
    if not pairs:
        return
    lines = [f"  {policy} on {hw}" + ("" if engine == DEFAULT_ENGINE else f" (engine {engine})")
             + f": {reason}" for policy, engine, hw, reason in pairs]
    entries = ", ".join(f"{{policy: {p}, hardware: {h}"
                        + ("" if e == DEFAULT_ENGINE else f", engine: {e}") + "}" for p, e, h, _ in pairs)
    raise MpsimInputError(f"{spec.source}: {len(pairs)} policy/hardware pair(s) of the grid cannot run:\n"
                          + "\n".join(lines) + f"\nleave them out with `exclude: [{entries}]` in the spec")


def _reason(model: ModelSpec, policy: str, engine: str, hw: HardwareSpec) -> str:
    """'' when `hw` can run the probe, else the device's reason (the unsupported dtype)."""
    choice = MPSIM_KERNELS if engine == DEFAULT_ENGINE else EngineChoice.on(engine, hw)
    try:
        simulate(_probe_trace(model, policy, choice), hw, "roofline")
    except UnsupportedDtypeError as exc:
        return str(exc)
    return ""


@lru_cache(maxsize=64)
def _probe_trace(model: ModelSpec, policy: str, choice: EngineChoice) -> Trace:
    return synthesize(model, parse_policy(policy), PROBE, engine=choice)
