"""Sweep specs: a YAML grid of models x policies x engines x hardware x workloads x performance models.

The spec is untrusted input: it is read with a safe loader that refuses duplicate keys
(mpsim.hw_models.yaml_load), every key is checked against the allowed ones, and every name is
resolved (model preset or config.json, policy grammar, hardware file, performance model) before any
work starts. A bad spec is one `MpsimInputError` naming the file and key.

Expansion yields `Group`s, one per (model, policy, engine, workload): the trace is synthesized once
per group (per hardware architecture for an engine other than mpsim: its kernels follow the GPU)
and replayed on every (hardware, performance model) point of it. `engines` (optional, default
[mpsim]) names engine files (`mpsim engines`); a policy an engine of the spec cannot run is the
spec's error. `tp` and `pp` (optional lists, default [1]) are the parallel plans' axes (their
product; mpsim/parallel.py): a plan a model cannot take is the spec's error. `micro_batches`
(optional list, default [1]) splits each trace point's batch into pipeline micro-batches (mpsim
synth --micro-batches; every value must divide every workload's batch; serving points do not take
it). `exclude` (optional) leaves (model, policy, engine, hardware) combinations out of the grid
(analysis/sweep/exclude.py). `quant_method` (optional, one of mpsim's QUANT_METHODS) is the
checkpoint's quantization method every engine of the spec runs (synth --quant-method). Each point
has a stable
key, a hash
of everything that decides its numbers, so a rerun recognises the points it already has.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsim import limits
from mpsim.analysis.sweep.exclude import Exclusion, excluded, parse_exclude
from mpsim.analysis.sweep.serve import ServeSection, parse_section
from mpsim.engines import check_policy, get_engine
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import HardwareSpec
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.models import ModelSpec, get_model
from mpsim.parallel import ParallelPlan, check_plan
from mpsim.policy import parse_policy
from mpsim.sim import check_model, model_version
from mpsim.sim.memo import source_fingerprint
from mpsim.traces.schema import DEFAULT_ENGINE
from mpsim.workload import Workload, check_context

# Bump when a change to the point computation makes old point files stale.
POINT_FORMAT = 1
REQUIRED_KEYS = ("models", "policies", "hardware")  # and workloads, serve or both
OPTIONAL_KEYS = ("name", "workloads", "perf_models", "serve", "allow_beyond_context", "engines", "tp", "pp",
                 "micro_batches", "exclude", "quant_method")
DEFAULT_PERF_MODELS = ("sim", "roofline")
WORKLOAD_KEYS = ("prompt_len", "gen_len", "batch")
NOT_IN_KEY = ("max_context_len", "context_source")  # model fields that decide no number


@dataclass(frozen=True)
class Point:
    """One row of the results table: a trace of its group replayed on one hw by one perf model."""

    key: str
    hw: str
    perf_model: str


@dataclass(frozen=True)
class Group:
    """The points that share one synthesized trace."""

    model: ModelSpec
    policy: str
    workload: Workload
    points: tuple[Point, ...]
    engine: str = DEFAULT_ENGINE
    tp: int = 1
    pp: int = 1
    micro_batches: int = 1
    quant_method: str | None = None


@dataclass(frozen=True)
class SweepSpec:
    name: str
    models: tuple[ModelSpec, ...]
    policies: tuple[str, ...]
    hardware: dict[str, HardwareSpec]  # by the name the table uses (the file's `name:`)
    workloads: tuple[Workload, ...]
    perf_models: tuple[str, ...]
    source: str = "<spec>"
    serve: ServeSection | None = None  # serving runs over request rates (analysis/sweep/serve.py)
    warnings: tuple[str, ...] = ()  # workloads past a model's context, run because the spec allows it
    engines: tuple[str, ...] = (DEFAULT_ENGINE,)
    plans: tuple[tuple[int, int], ...] = ((1, 1),)  # (tp, pp) of the `tp` x `pp` axes
    micro_batches: tuple[int, ...] = (1,)  # the pipeline micro-batches of the trace points
    exclude: tuple[Exclusion, ...] = ()  # holes in the grid (trace and serve points alike)
    quant_method: str | None = None  # the checkpoint's quantization method (engines that dispatch on it)

    def excludes(self, model: str, policy: str, engine: str, hardware: str) -> bool:
        return excluded(self.exclude, model, policy, engine, hardware)

    def groups(self) -> list[Group]:
        """Every group in grid order: model, workload, policy, engine, plan, micro-batches; inside:
        hardware, perf model (less the excluded hardware; a group left with none is dropped)."""
        out = []
        for model, wl, pol, eng, (tp, pp), mb in itertools.product(
                self.models, self.workloads, self.policies, self.engines, self.plans, self.micro_batches):
            points = tuple(Point(point_key(model, pol, wl, hw, pm, eng, tp, pp, mb, self.quant_method),
                                 name, pm)
                           for name, hw in self.hardware.items() for pm in self.perf_models
                           if not self.excludes(model.name, pol, eng, name))
            if points:
                out.append(Group(model, pol, wl, points, eng, tp, pp, mb, self.quant_method))
        return out

    def keys(self) -> list[str]:
        return [p.key for g in self.groups() for p in g.points]

    def __len__(self) -> int:
        if self.exclude:
            return sum(len(g.points) for g in self.groups())
        return (len(self.models) * len(self.policies) * len(self.hardware) * len(self.workloads)
                * len(self.perf_models) * len(self.engines) * len(self.plans) * len(self.micro_batches))


def point_key(model: ModelSpec, policy: str, workload: Workload, hw: HardwareSpec, perf_model: str,
              engine: str = DEFAULT_ENGINE, tp: int = 1, pp: int = 1, micro_batches: int = 1,
              quant_method: str | None = None) -> str:
    """A stable hash of everything that decides a point's numbers (not of names alone; the engine
    only when it is not the default, so the default's keys are those of specs before engines)."""
    spec = {k: v for k, v in model.as_dict().items() if k not in NOT_IN_KEY}
    ident = {"format": POINT_FORMAT, "model": spec, "policy": policy,
             "workload": workload.as_dict(), "hw": dataclasses.asdict(hw),  # type: ignore[call-overload]
             "perf_model": perf_model, "perf_model_version": model_version(perf_model),
             # the source of the simulator, roofline, accounting, synthesis and launch configs
             "code": source_fingerprint()}
    if engine != DEFAULT_ENGINE:
        ident["engine"] = engine
    if (tp, pp) != (1, 1):  # one device's keys stay those of specs before parallel plans
        ident["parallel"] = [tp, pp]
    if micro_batches != 1:  # unsplit batches keep the keys of specs before micro-batches
        ident["micro_batches"] = micro_batches
    if quant_method is not None:  # no method: the keys of specs before methods
        ident["quant_method"] = quant_method
    text = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def load_spec(path: str | Path, *, allow_beyond_context: bool = False) -> SweepSpec:
    """Read and fully validate a sweep spec file (`allow_beyond_context`: --allow-beyond-context)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MpsimInputError(f"{path}: cannot read sweep spec ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise MpsimInputError(f"{path}: not a text (UTF-8) file: byte {exc.start}: expected a YAML "
                              "sweep spec") from None
    return parse_spec(text, str(path), allow_beyond_context=allow_beyond_context)


def parse_spec(text: str, source: str = "<spec>", *, allow_beyond_context: bool = False) -> SweepSpec:
    try:
        data = safe_yaml(text)
    except YAMLError as exc:
        raise MpsimInputError(f"{source}: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise MpsimInputError(f"{source}: a sweep spec must be a mapping with keys {REQUIRED_KEYS}")
    return spec_from_dict(data, source, allow_beyond_context=allow_beyond_context)


def spec_from_dict(data: dict[str, Any], source: str = "<spec>", *,
                   allow_beyond_context: bool = False) -> SweepSpec:
    allowed = REQUIRED_KEYS + OPTIONAL_KEYS
    for key in data:
        if key not in allowed:
            raise MpsimInputError(f"{source}: {key}: unknown key; expected one of: {', '.join(allowed)}")
    for key in REQUIRED_KEYS:
        if key not in data:
            raise MpsimInputError(f"{source}: {key}: missing (required keys: {', '.join(REQUIRED_KEYS)})")
    if "workloads" not in data and "serve" not in data:
        raise MpsimInputError(f"{source}: workloads: missing (a spec needs workloads, a serve section, "
                              "or both)")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str):
        raise MpsimInputError(f"{source}: name: expected a string, got {name!r}")
    models = _unique(source, "models", [_resolve(source, "models", i, m, get_model)
                                        for i, m in enumerate(_names(source, data, "models"))])
    policies, hardware = _policies(source, data), _hardware(source, data)
    engines = _engines(source, data, policies)
    plans = _plans(source, data, models)
    workloads = _workloads(source, data["workloads"]) if "workloads" in data else ()
    micro = _micro_batches(source, data, workloads)
    perf_models = _perf_models(source, data)
    beyond = allow_beyond_context or _flag(source, data, "allow_beyond_context")
    serve = parse_section(source, data["serve"]) if "serve" in data else None
    exclude = parse_exclude(source, data["exclude"], {
        "model": tuple(m.name for m in models), "policy": policies, "engine": engines,
        "hardware": tuple(hardware)}) if "exclude" in data else ()
    grid = len(models) * len(policies) * len(hardware) * len(engines) * len(plans)
    limits.SWEEP_POINTS.check(grid * (len(workloads) * len(perf_models) * len(micro)
                                      + len(serve.rates if serve else ())),
                              f"{source}: the grid")
    return SweepSpec(
        name=name, models=models, policies=policies, hardware=hardware, workloads=workloads,
        perf_models=perf_models, source=source, serve=serve,
        warnings=_context_warnings(source, models, workloads, beyond), engines=engines, plans=plans,
        micro_batches=micro, exclude=exclude, quant_method=_quant_method(source, data),
    )


def _quant_method(source: str, data: dict[str, Any]) -> str | None:
    from mpsim.engines.files import QUANT_METHODS

    value = data.get("quant_method")
    if value is not None and value not in QUANT_METHODS:
        raise MpsimInputError(f"{source}: quant_method: expected one of {list(QUANT_METHODS)}, "
                              f"got {value!r}")
    return value


def _flag(source: str, data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise MpsimInputError(f"{source}: {key}: expected true or false, got {value!r}")
    return value


def _context_warnings(source: str, models: tuple[ModelSpec, ...], workloads: tuple[Workload, ...],
                      allowed: bool) -> tuple[str, ...]:
    """The context rule for every (model, workload) of the grid: the first one past its model's
    context is the spec's error unless the spec (allow_beyond_context: true) or the command line
    (--allow-beyond-context) allows it; allowed ones become warnings."""
    out = []
    for model in models:
        for i, wl in enumerate(workloads):
            try:
                message = check_context(model, wl.prompt_len, wl.gen_len, allow_beyond=allowed)
            except MpsimInputError as exc:
                raise MpsimInputError(f"{source}: workloads[{i}] on {model.name}: {exc} (or set "
                                      "allow_beyond_context: true in the spec)") from None
            if message:
                out.append(f"{source}: workloads[{i}] on {model.name}: {message}")
    return tuple(out)


def _names(source: str, data: dict[str, Any], key: str) -> list[str]:
    value = data[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise MpsimInputError(f"{source}: {key}: expected a non-empty list of names, got {value!r}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise MpsimInputError(f"{source}: {key}[{i}]: expected a string, got {item!r}")
    return value


def _resolve(source: str, key: str, i: int, name: str, fn: Any) -> Any:
    try:
        return fn(name)
    except ValueError as exc:  # MpsimInputError, HardwareFileError: both name the bad value
        raise MpsimInputError(f"{source}: {key}[{i}]: {exc}") from None


def _unique(source: str, key: str, items: list[Any]) -> tuple[Any, ...]:
    counts = collections.Counter(getattr(x, "name", x) for x in items)
    dupes = sorted(str(x) for x, n in counts.items() if n > 1)
    if dupes:
        raise MpsimInputError(f"{source}: {key}: listed more than once: {', '.join(dupes)}")
    return tuple(items)


def _policies(source: str, data: dict[str, Any]) -> tuple[str, ...]:
    names = _names(source, data, "policies")
    spellings = [_resolve(source, "policies", i, p, parse_policy).spelling for i, p in enumerate(names)]
    return _unique(source, "policies", spellings)


def _engines(source: str, data: dict[str, Any], policies: tuple[str, ...]) -> tuple[str, ...]:
    """The engines axis (default mpsim's own kernels); every engine must run every policy."""
    names = _names(source, data, "engines") if "engines" in data else [DEFAULT_ENGINE]
    for i, name in enumerate(names):
        engine = _resolve(source, "engines", i, name, get_engine)
        for policy in policies:
            try:
                check_policy(engine, parse_policy(policy))
            except MpsimInputError as exc:
                raise MpsimInputError(f"{source}: engines[{i}]: {exc}") from None
    return _unique(source, "engines", names)


def _plans(source: str, data: dict[str, Any], models: tuple[ModelSpec, ...]) -> tuple[tuple[int, int], ...]:
    """The `tp` x `pp` axes (each a list of whole numbers >= 1, default [1]): every plan of their
    product must suit every model of the spec (mpsim/parallel.py check_plan)."""
    axes = []
    for key in ("tp", "pp"):
        value = data.get(key, [1])
        value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(value, list) or not value or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
            raise MpsimInputError(f"{source}: {key}: expected a non-empty list of whole numbers >= 1, "
                                  f"got {value!r}")
        axes.append(_unique(source, key, value))
    plans = tuple(itertools.product(*axes))
    for model in models:
        for tp, pp in plans:
            try:
                check_plan(model, ParallelPlan(tp, pp))
            except MpsimInputError as exc:
                raise MpsimInputError(f"{source}: tp/pp on {model.name}: {exc}") from None
    return plans


def _micro_batches(source: str, data: dict[str, Any], workloads: tuple[Workload, ...]) -> tuple[int, ...]:
    """The `micro_batches` axis (a list of whole numbers >= 1, default [1]), each dividing every
    workload's batch (mpsim/synth.py micro_batch_size)."""
    value = data.get("micro_batches", [1])
    value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(value, list) or not value or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
        raise MpsimInputError(f"{source}: micro_batches: expected a non-empty list of whole numbers "
                              f">= 1, got {value!r}")
    for m in value:
        for wl in workloads:
            if wl.batch % m:
                raise MpsimInputError(f"{source}: micro_batches: {m} does not divide the batch of "
                                      f"{wl.batch} sequences of workload {wl.as_dict()}")
    return _unique(source, "micro_batches", value)


def _hardware(source: str, data: dict[str, Any]) -> dict[str, HardwareSpec]:
    specs = [_resolve(source, "hardware", i, h, load_hardware)
             for i, h in enumerate(_names(source, data, "hardware"))]
    return {hw.name: hw for hw in _unique(source, "hardware", specs)}


def _perf_models(source: str, data: dict[str, Any]) -> tuple[str, ...]:
    names = _names(source, data, "perf_models") if "perf_models" in data else list(DEFAULT_PERF_MODELS)
    for i, name in enumerate(names):
        _resolve(source, "perf_models", i, name, check_model)
    return _unique(source, "perf_models", names)


def _workloads(source: str, value: Any) -> tuple[Workload, ...]:
    """A list of {prompt_len, gen_len, batch} mappings, or one mapping of lists (their product)."""
    if isinstance(value, dict):
        grid = {k: v if isinstance(v, list) else [v] for k, v in value.items()}
        _check_workload_keys(source, "workloads", grid)
        limits.SWEEP_POINTS.check(math.prod(len(grid.get(k, [1])) for k in WORKLOAD_KEYS),
                                  f"{source}: workloads")
        combos = itertools.product(*(grid.get(k, [1]) for k in WORKLOAD_KEYS))
        items: list[Any] = [dict(zip(WORKLOAD_KEYS, c, strict=True)) for c in combos]
    elif isinstance(value, list) and value:
        limits.SWEEP_POINTS.check(len(value), f"{source}: workloads")
        items = value
    else:
        raise MpsimInputError(f"{source}: workloads: expected a non-empty list of "
                              f"{{prompt_len, gen_len, batch}} mappings, got {value!r}")
    loads = [_workload(source, f"workloads[{i}]", item) for i, item in enumerate(items)]
    return _unique(source, "workloads", loads)


def _check_workload_keys(source: str, where: str, item: dict[str, Any]) -> None:
    for key in item:
        if key not in WORKLOAD_KEYS:
            raise MpsimInputError(f"{source}: {where}.{key}: unknown key; expected one of: "
                                  f"{', '.join(WORKLOAD_KEYS)}")
    for key in ("prompt_len", "gen_len"):
        if key not in item:
            raise MpsimInputError(f"{source}: {where}.{key}: missing")


def _workload(source: str, where: str, item: Any) -> Workload:
    if not isinstance(item, dict):
        raise MpsimInputError(f"{source}: {where}: expected a mapping with keys {WORKLOAD_KEYS}, "
                              f"got {item!r}")
    _check_workload_keys(source, where, item)
    values = {}
    for key in WORKLOAD_KEYS:
        v = item.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise MpsimInputError(f"{source}: {where}.{key}: expected an integer >= 1, got {v!r}")
        values[key] = v
    return Workload(**values)
