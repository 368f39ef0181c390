"""Engines: the inference stacks people deploy (TensorRT-LLM, vLLM, LMDeploy's TurboMind, and mpsim's
own kernels), each a data file (mpsim/data/engines/<name>.yaml, docs/engines.md) naming which
library kernel serves each op of a pass per format and GPU architecture, and what it can run.

`get_engine(name)` reads and checks a shipped file (cached); an unknown name is an error naming the
known ones. `check_policy(engine, policy)` is the one error for a policy the engine cannot run.
`DEFAULT_ENGINE` ("mpsim": mpsim's own Triton kernels, what capture runs) builds today's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from mpsim.engines.files import (
    ARCHES,
    FIXED_SCALES,
    OPS,
    Choice,
    Engine,
    Supports,
    check_method,
    parse_engine,
)
from mpsim.engines.rows import KERNELS_BY_OP, Target
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec
from mpsim.kernels import launch_config as lc
from mpsim.policy import Policy
from mpsim.traces.schema import DEFAULT_ENGINE

__all__ = ["ARCHES", "DEFAULT_ARCH", "DEFAULT_ENGINE", "MPSIM_KERNELS", "OPS", "Choice", "Engine",
           "EngineChoice", "Supports", "Target", "architecture", "check_policy", "describe_supports",
           "engine_names", "engine_target", "get_engine", "model_heads"]

DEFAULT_ARCH = "hopper"
_FOLDER = ("data", "engines")


def engine_names() -> list[str]:
    """The shipped engines, by file name (sorted)."""
    folder = resources.files("mpsim").joinpath(*_FOLDER)
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def _file(name: str) -> tuple[str, str]:
    """(text, path) of the shipped engine file `name`; an unknown name is an error naming the known."""
    known = engine_names()
    if name not in known:
        raise MpsimInputError(f"unknown engine {name!r}; expected one of {known}")
    file = f"mpsim/{'/'.join(_FOLDER)}/{name}.yaml"
    return resources.files("mpsim").joinpath(*_FOLDER, f"{name}.yaml").read_text("utf-8"), file


@cache
def get_engine(name: str) -> Engine:
    """The shipped engine `name`, checked against the dispatch table's kernels."""
    text, file = _file(name)
    engine = parse_engine(text, file, KERNELS_BY_OP, parent=_file)
    if engine.name != name:
        raise MpsimInputError(f"engine file {file}: name {engine.name!r} differs from the file name {name!r}")
    return engine


def architecture(hw: GpuSpec) -> str:
    """The engine-file architecture of `hw` by its dense fp16 and fp8 tensor rates per SM per clock
    (mpsim/sim/gpu/arch.py's generations; Ada is the Ampere-class part with fp8 tensor cores)."""
    rates = hw.tensor_core.flops_per_clock_per_SM
    if rates["fp16"] >= 8192:
        return "blackwell"
    if rates["fp16"] >= 4096:
        return "hopper"
    return "ada" if rates.get("fp8") else "ampere"


def describe_supports(engine: Engine) -> str:
    """What an engine runs, in words: "weights fp16, int4-group (groups row, 64, 128); KV cache kv16,
    kv8f"."""
    s = engine.supports
    parts = []
    for fmt, groups in s.weights:
        if fmt == "fp8":
            parts.append(f"fp8 (scales {', '.join('tensor' if g is None else 'row' for g in groups or ())})")
        elif fmt == "anyprec":
            parts.append(f"anyprec ({', '.join(map(str, s.anyprec_bits))} bits)")
        elif groups is None:
            parts.append(f"{fmt} (groups row or any multiple of 32)")
        elif groups:
            parts.append(f"{fmt} (groups {', '.join('row' if g == 0 else str(g) for g in groups)})")
        else:
            parts.append(fmt)
    return f"weights {', '.join(parts)}; KV cache {', '.join(s.kv_caches)}"


def check_policy(engine: Engine, policy: Policy) -> None:
    """Nothing when `engine` runs every format `policy` reads; else one error naming the engine, the
    policy, why, what the engine supports and the shipped engines that do run it."""
    why = _why_not(engine, policy)
    if why is None:
        return
    runs = [n for n in engine_names() if n != engine.name and _why_not(get_engine(n), policy) is None]
    elsewhere = f"; engines that run it: {', '.join(runs)}" if runs else ""
    raise MpsimInputError(f"engine {engine.name!r} cannot run policy {policy.spelling!r}: {why}; "
                          f"{engine.name} runs {describe_supports(engine)}{elsewhere}")


def _why_not(engine: Engine, policy: Policy) -> str | None:
    """Why `engine` cannot run `policy` (None: it can)."""
    s = engine.supports
    widths = sorted({policy.prefill_bits, *(b for _, b in policy.decode_schedule)})
    if policy.family == "anyprec":
        if "anyprec" not in s.formats:
            return "it has no any-precision weights"
        if (off := [b for b in widths if b not in s.anyprec_bits]):
            return f"it has no {off[0]}-bit any-precision weights"
    elif policy.family in ("uniform", "float"):
        fmt = policy.weights_at("prefill", 0).w_format
        if fmt not in s.formats:
            return f"it has no {fmt} weights"
        sizes = s.group_sizes(fmt)
        if sizes is not None and fmt not in FIXED_SCALES and policy.group_size not in sizes:
            group = {0: "row", None: "tensor"}.get(policy.group_size, policy.group_size)
            return f"it has no {fmt} weights in {'scales per' if fmt == 'fp8' else 'groups of'} {group}"
    if policy.kv_suffix not in s.kv_caches:
        fp8_only = policy.kv_suffix == "kv8" and "kv8f" in s.kv_caches
        hint = " (its 8-bit cache is fp8 e4m3: +kv8f)" if fp8_only else ""
        return f"it has no {policy.kv_format} KV cache ({policy.kv_suffix}){hint}"
    return None


@dataclass(frozen=True)
class EngineChoice:
    """Whose kernels rows are built as (`--engine`): the engine, the GPU architecture its file's
    per-architecture choices are read for (None: DEFAULT_ARCH) and the SM count the other libraries'
    heuristics split over (None: kernels/launch_config.py GPU_SMS)."""

    name: str = DEFAULT_ENGINE
    arch: str | None = None
    sms: int | None = None
    method: str | None = None  # the checkpoint's quantization method (files.QUANT_METHODS); None:
                               # the engine's first choice for the format

    @classmethod
    def on(cls, name: str, hw: object, method: str | None = None) -> EngineChoice:
        """Engine `name` on the hardware `hw` (its architecture and SMs), running a checkpoint of
        quantization `method`; the default engine on any hardware, another engine on a GPU only."""
        check_method(method)
        if isinstance(hw, GpuSpec):
            return cls(name, architecture(hw), hw.compute_units, method)
        if name != DEFAULT_ENGINE:
            raise MpsimInputError(f"engine {name!r} runs on NVIDIA GPUs; {getattr(hw, 'name', hw)} is "
                                  "not one (its rows are mpsim's own kernels: --engine mpsim)")
        return cls(name, method=method)


MPSIM_KERNELS = EngineChoice()  # the default: mpsim's own kernels, as captured


def model_heads(model: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(query heads, KV heads, head dim, rotary dims) of a model (ModelSpec.as_dict(), or a trace's
    metadata model); an error naming what is missing."""
    try:
        d = int(model["head_dim"])
        return (int(model["num_heads"]), int(model["num_kv_heads"]), d,
                int(d * float(model.get("rotary_fraction", 1.0))))
    except (KeyError, TypeError, ValueError):
        raise MpsimInputError("the model names no heads (num_heads, num_kv_heads, head_dim), which the "
                              "engines' kernels need") from None


def engine_target(name: str, policy: Policy, heads: tuple[int, int, int, int], *,
                  arch: str | None = None, sms: int | None = None,
                  on_gpu: bool = True, method: str | None = None) -> Target | None:
    """What rows are built for with engine `name` running `policy` on `arch` (default hopper, the
    architecture the GPU model prices every library kernel as today: mpsim/sim/gpu/arch.py) with
    `sms` SMs: None for the default engine (mpsim's own launchers build the rows, as captured).
    Errors: an unknown engine or architecture, a policy the engine cannot run."""
    engine = get_engine(name)
    check_policy(engine, policy)
    if arch is not None and arch not in ARCHES:
        raise MpsimInputError(f"unknown architecture {arch!r}; expected one of {list(ARCHES)}")
    if name == DEFAULT_ENGINE:
        return None
    check_method(method)
    return Target(engine, arch or DEFAULT_ARCH, heads, sms or lc.GPU_SMS, on_gpu, method)
