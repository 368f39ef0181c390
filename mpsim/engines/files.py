"""An engine file (mpsim/data/engines/<name>.yaml) read into an `Engine`: which library kernel serves
each op of a forward pass, per weight or KV format, per GPU architecture, with the M cut-offs where
the engine switches kernels, and what the engine can run (docs/engines.md).

Every problem is one MpsimInputError naming the file, the key and what was expected; YAML goes
through the project's one loader (hw_models/yaml_load.py: duplicate keys rejected).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.traces.schema import KV_BITS, W_FORMATS

ARCHES = ("ampere", "ada", "hopper", "blackwell")
# The ops of a forward pass (mpsim/launch_plan.py) an engine file must cover, and the formats an op
# is keyed by: gemm by the weight format (trace w_format), decode attention and the KV write by the
# KV cache (kv16, kv8, kv4); every other op by `any`. `allreduce`: the library of the all-reduce after
# each row-parallel GEMM of a tensor-parallel plan (mpsim/library/collectives.py, mpsim/parallel.py).
OPS = ("embed", "rms_norm", "layer_norm", "gemm", "rope", "kv_write", "decode_attention",
       "prefill_attention", "silu_mul", "gelu", "residual_add", "sample", "allreduce")
KV_KEYED = ("kv_write", "decode_attention")
TOP_KEYS = ("name", "description", "source", "supports", "ops")
CHOICE_KEYS = ("kernel", "max_m", "arch", "source", "stands_in_for")
# `kernel: fused`: the op launches nothing of its own, its work is inside the engine's attention
# kernel on those architectures (TensorRT-LLM's XQA and context FMHA apply RoPE and append the new
# K/V themselves; their work models count it). Only these ops can be fused.
FUSED = "fused"
FUSABLE_OPS = ("rope", "kv_write")


def kv_key(bits: int) -> str:
    return f"kv{bits}"


@dataclass(frozen=True)
class Choice:
    """One kernel choice of an op and format: `kernel` serves M <= max_m (None: every M) on the
    architectures in `arch`. `stands_in_for`: the engine's real kernel, not modelled yet, that this
    kernel prices in its place (None: `kernel` is the engine's own)."""

    kernel: str
    source: str
    max_m: int | None = None
    arch: tuple[str, ...] = ARCHES
    stands_in_for: str | None = None


@dataclass(frozen=True)
class Supports:
    """What an engine runs: weight format -> the group sizes it takes (0 = one group per row; None =
    any the policy grammar takes: row or a multiple of 32; empty for formats without groups: fp16,
    any-precision), the any-precision widths, the KV cache bits."""

    weights: tuple[tuple[str, tuple[int, ...] | None], ...]
    anyprec_bits: tuple[int, ...]
    kv_bits: tuple[int, ...]

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(f for f, _ in self.weights)

    def group_sizes(self, fmt: str) -> tuple[int, ...] | None:
        return dict(self.weights)[fmt]


@dataclass(frozen=True)
class Engine:
    name: str
    description: str
    source: str
    supports: Supports
    ops: tuple[tuple[str, tuple[tuple[str, tuple[Choice, ...]], ...]], ...]  # op -> format -> choices
    file: str

    def choices(self, op: str, fmt: str) -> tuple[Choice, ...]:
        return dict(dict(self.ops)[op])[fmt]

    def formats(self, op: str) -> tuple[str, ...]:
        return tuple(f for f, _ in dict(self.ops)[op])


def parse_engine(text: str, file: str, kernels_by_op: Mapping[str, tuple[str, ...]]) -> Engine:
    """The engine in `text` (from `file`); `kernels_by_op[op]`: the kernels of the dispatch table
    that can serve `op`."""
    try:
        doc = safe_yaml(text)
    except YAMLError as exc:
        raise MpsimInputError(f"engine file {file}: {yaml_problem(exc)}") from None
    where = f"engine file {file}"
    doc = _mapping(doc, where, TOP_KEYS, required=TOP_KEYS)
    name = _text(doc["name"], f"{where}: name")
    supports = _supports(doc["supports"], f"{where}: supports")
    ops = _ops(doc["ops"], f"{where}: ops", supports, kernels_by_op)
    return Engine(name, _text(doc["description"], f"{where}: description"),
                  _text(doc["source"], f"{where}: source"), supports, ops, file)


def _mapping(value: Any, where: str, allowed: tuple[str, ...],
             required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MpsimInputError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = [k for k in value if k not in allowed]
    if unknown:
        raise MpsimInputError(f"{where}: unknown key {unknown[0]!r}; expected one of {list(allowed)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise MpsimInputError(f"{where}: missing key {missing[0]!r}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MpsimInputError(f"{where}: expected a non-empty text, got {value!r}")
    return value.strip()


def _ints(value: Any, where: str, allowed: tuple[int, ...]) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise MpsimInputError(f"{where}: expected a non-empty list of {list(allowed)}, got {value!r}")
    for v in value:
        if isinstance(v, bool) or v not in allowed:
            raise MpsimInputError(f"{where}: {v!r} is not one of {list(allowed)}")
    return tuple(value)


def _supports(value: Any, where: str) -> Supports:
    doc = _mapping(value, where, ("weights", "kv_bits"), required=("weights", "kv_bits"))
    weights = _mapping(doc["weights"], f"{where}.weights", W_FORMATS)
    if "fp16" not in weights:
        raise MpsimInputError(f"{where}.weights: every engine runs fp16 weights (lm_head); add fp16")
    out: list[tuple[str, tuple[int, ...] | None]] = []
    anyprec: tuple[int, ...] = ()
    for fmt, spec in weights.items():
        here = f"{where}.weights.{fmt}"
        if fmt == "fp16":
            _mapping(spec or {}, here, ())
            out.append((fmt, ()))
        elif fmt == "anyprec":
            anyprec = _ints(_mapping(spec, here, ("bits",), ("bits",))["bits"], f"{here}.bits",
                            tuple(range(2, 9)))
            out.append((fmt, ()))
        else:
            groups = _mapping(spec, here, ("group_sizes",), ("group_sizes",))["group_sizes"]
            if groups == "any":
                out.append((fmt, None))
                continue
            if not isinstance(groups, list) or not groups:
                raise MpsimInputError(f"{here}.group_sizes: expected 'any' or a non-empty list of "
                                      f"'row' or multiples of 32, got {groups!r}")
            sizes = tuple(0 if g == "row" else g for g in groups)
            bad = [g for g, s in zip(groups, sizes, strict=True)
                   if isinstance(s, bool) or not isinstance(s, int) or s < 0 or s % 32]
            if bad:
                raise MpsimInputError(f"{here}.group_sizes: {bad[0]!r} is not 'row' or a multiple of 32")
            out.append((fmt, sizes))
    kv = _ints(doc["kv_bits"], f"{where}.kv_bits", KV_BITS)
    if 16 not in kv:
        raise MpsimInputError(f"{where}.kv_bits: every engine runs a 16-bit KV cache; add 16")
    return Supports(tuple(out), anyprec, kv)


def _ops(value: Any, where: str, supports: Supports, kernels_by_op: Mapping[str, tuple[str, ...]]
         ) -> tuple[tuple[str, tuple[tuple[str, tuple[Choice, ...]], ...]], ...]:
    """Every op of OPS, each format the engine supports covered: no op or format left to a default."""
    doc = _mapping(value, where, OPS, required=OPS)
    out = []
    for op in OPS:
        here = f"{where}.{op}"
        if op == "gemm":
            formats = supports.formats
        elif op in KV_KEYED:
            formats = tuple(kv_key(b) for b in supports.kv_bits)
        else:
            formats = ("any",)
        per_format = _mapping(doc[op], here, formats, required=formats)
        kernels = (*kernels_by_op[op], FUSED) if op in FUSABLE_OPS else kernels_by_op[op]
        out.append((op, tuple((f, _choices(per_format[f], f"{here}.{f}", kernels))
                              for f in formats)))
    return tuple(out)


def _choices(value: Any, where: str, kernels: tuple[str, ...]) -> tuple[Choice, ...]:
    """The choices of one op and format, first match wins; every architecture must end with a
    choice for every M (no max_m)."""
    if not isinstance(value, list) or not value:
        raise MpsimInputError(f"{where}: expected a non-empty list of kernel choices, got {value!r}")
    out = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        doc = _mapping(item, here, CHOICE_KEYS, required=("kernel", "source"))
        kernel = _text(doc["kernel"], f"{here}.kernel")
        if kernel not in kernels:
            raise MpsimInputError(f"{here}.kernel: {kernel!r} is not a kernel of the library dispatch "
                                  f"table that serves this op; expected one of {list(kernels)}")
        max_m = doc.get("max_m")
        if max_m is not None and (isinstance(max_m, bool) or not isinstance(max_m, int) or max_m < 1):
            raise MpsimInputError(f"{here}.max_m: expected a whole number >= 1, got {max_m!r}")
        arch = ARCHES if "arch" not in doc else _arches(doc["arch"], f"{here}.arch")
        stands = doc.get("stands_in_for")
        if kernel == FUSED and stands is not None:
            raise MpsimInputError(f"{here}: a fused op stands in for nothing; drop stands_in_for")
        out.append(Choice(kernel, _text(doc["source"], f"{here}.source"), max_m, arch,
                          None if stands is None else _text(stands, f"{here}.stands_in_for")))
    for a in ARCHES:
        if not any(c.max_m is None and a in c.arch for c in out):
            raise MpsimInputError(f"{where}: no choice covers every M on {a}; end the list with a "
                                  f"choice without max_m for {a}")
    return tuple(out)


def _arches(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or any(a not in ARCHES for a in value):
        raise MpsimInputError(f"{where}: expected a non-empty list of {list(ARCHES)}, got {value!r}")
    return tuple(value)
