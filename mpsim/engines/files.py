"""An engine file (mpsim/data/engines/<name>.yaml) read into an `Engine`: which library kernel serves
each op of a forward pass, per weight or KV format, per GPU architecture, with the M cut-offs where
the engine switches kernels, and what the engine can run (docs/engines.md).

Every problem is one MpsimInputError naming the file, the key and what was expected; YAML goes
through the project's one loader (hw_models/yaml_load.py: duplicate keys rejected).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.traces.schema import W_FORMATS

ARCHES = ("ampere", "ada", "hopper", "blackwell")
# The ops of a forward pass (mpsim/launch_plan.py) an engine file must cover, and the formats an op
# is keyed by: gemm by the weight format (trace w_format), decode attention and the KV write by the
# KV cache (kv16, kv8 and kv4 int, kv8f fp8 e4m3: the policy's suffix); every other op by `any`.
# `allreduce`: the library of the all-reduce after each row-parallel GEMM of a tensor-parallel plan
# (mpsim/library/collectives.py, mpsim/parallel.py).
OPS = ("embed", "rms_norm", "layer_norm", "gemm", "rope", "kv_write", "decode_attention",
       "prefill_attention", "silu_mul", "gelu", "residual_add", "sample", "allreduce")
KV_KEYED = ("kv_write", "decode_attention")
TOP_KEYS = ("name", "description", "source", "supports", "ops")
# a file that `extends` another engine takes its supports and ops, replacing whole ops it names
CHILD_KEYS = ("extends", *TOP_KEYS)
CHOICE_KEYS = ("kernel", "max_m", "arch", "source", "stands_in_for", "a_dtype", "act_quant",
               "n_multiple", "k_multiple", "methods")
# The checkpoint quantization methods a weight-only GEMM choice can be limited to (`methods`): an
# engine dispatches by the checkpoint's method, not only by its format. vLLM: `gptq` (gptq_marlin
# and compressed-tensors WNA16 go through choose_mp_linear_kernel, Machete first on sm90), `awq`
# (awq_marlin.py AWQMarlinLinearMethod.apply calls apply_awq_marlin_linear: Marlin on every GPU),
# `rtn` (rtn.py RTNLinearMethod.apply calls apply_rtn_marlin_linear: Marlin). SGLang: `gemlite`
# (--torchao-config gemlite-<bits>-<group>: torchao_utils.py apply_torchao_config_to_model
# quantizes with torchao's gemlite_uintx_weight_only, GemLite's Triton kernels). A choice without
# `methods` serves every method; a run that names no method takes the first choice that fits.
QUANT_METHODS = ("gptq", "awq", "rtn", "gemlite")
# KV cache keys -> the trace's kv_format (traces/schema.py KV_FORMATS)
KV_CACHES = {"kv16": "fp16", "kv8": "int8", "kv4": "int4", "kv8f": "fp8-e4m3"}
# Weight formats whose scales are fixed by the format (no group sizes to list): fp8-block 128x128,
# nvfp4 16, mxfp4 32; fp8 lists its scale granularity: `tensor` and/or `row`.
FIXED_SCALES = ("fp8-block", "nvfp4", "mxfp4")
# A GEMM choice's activations (trace a_dtype) and, where they are not 16-bit, the kernel that
# quantizes them first (`act_quant`: a kernel of KERNELS_BY_OP["act_quant"], or `fused` into the
# op before the GEMM, its source saying where).
A_DTYPES = ("fp16", "fp8-e4m3", "fp4-e2m1")
# `kernel: fused`: the op launches nothing of its own, its work is inside the engine's attention
# kernel on those architectures (TensorRT-LLM's XQA and context FMHA apply RoPE and append the new
# K/V themselves; their work models count it). Only these ops can be fused.
FUSED = "fused"
FUSABLE_OPS = ("rope", "kv_write")
# `kernel: none`: the engine does not run this op and format on those architectures; a row for it
# is one error quoting the choice's source (why, and what the engine runs instead).
NONE = "none"


def kv_key(bits: int, kv_format: str | None = None) -> str:
    """The engine-file key of a KV cache: by its kv_format (None: the integer format of `bits`)."""
    if kv_format is None:
        return f"kv{bits}"
    keys = {f: k for k, f in KV_CACHES.items()}
    if kv_format not in keys:
        raise MpsimInputError(f"unknown kv_format {kv_format!r}; expected one of {list(keys)}")
    return keys[kv_format]


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
    a_dtype: str = "fp16"  # gemm: the activations the kernel reads (trace a_dtype)
    act_quant: str | None = None  # gemm, a_dtype not fp16: the quantization kernel before it, or `fused`
    n_multiple: int | None = None  # gemm: the choice serves only N a multiple of this (a kernel's
    k_multiple: int | None = None  # shape requirement, e.g. DeepGEMM's), and K of this
    methods: tuple[str, ...] | None = None  # the checkpoint methods it serves (None: every one)

    def takes(self, arch: str, m: int, n: int | None = None, k: int | None = None,
              method: str | None = None) -> bool:
        """Whether the choice serves an M (and N, K: None skips the shape test) on `arch`, for a
        checkpoint of quantization `method` (None: whichever the engine takes first)."""
        if arch not in self.arch or (self.max_m is not None and m > self.max_m):
            return False
        if method is not None and self.methods is not None and method not in self.methods:
            return False
        if self.n_multiple is not None and n is not None and n % self.n_multiple:
            return False
        return not (self.k_multiple is not None and k is not None and k % self.k_multiple)

    @property
    def every_shape(self) -> bool:
        return (self.max_m is None and self.n_multiple is None and self.k_multiple is None
                and self.methods is None)


@dataclass(frozen=True)
class Supports:
    """What an engine runs: weight format -> the group sizes it takes (0 = one group per row; None =
    any the policy grammar takes: row or a multiple of 32; empty for formats without groups: fp16,
    any-precision, and those whose scales the format fixes: fp8-block, nvfp4, mxfp4; fp8: its scale
    granularities, None in the tuple per tensor, 0 per row), the any-precision widths, the KV caches
    (KV_CACHES keys)."""

    weights: tuple[tuple[str, tuple[int | None, ...] | None], ...]
    anyprec_bits: tuple[int, ...]
    kv_caches: tuple[str, ...]

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(f for f, _ in self.weights)

    def group_sizes(self, fmt: str) -> tuple[int | None, ...] | None:
        return dict(self.weights)[fmt]

    @property
    def kv_formats(self) -> tuple[str, ...]:
        return tuple(KV_CACHES[k] for k in self.kv_caches)


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


def parse_engine(text: str, file: str, kernels_by_op: Mapping[str, tuple[str, ...]],
                 parent: Callable[[str], tuple[str, str]] | None = None) -> Engine:
    """The engine in `text` (from `file`); `kernels_by_op[op]`: the kernels of the dispatch table
    that can serve `op`; `parent(name)`: (text, file) of the engine a file `extends`."""
    where = f"engine file {file}"
    doc = _merged(_load(text, file), file, parent, (file,))
    name = _text(doc["name"], f"{where}: name")
    supports = _supports(doc["supports"], f"{where}: supports")
    ops = _ops(doc["ops"], f"{where}: ops", supports, kernels_by_op)
    return Engine(name, _text(doc["description"], f"{where}: description"),
                  _text(doc["source"], f"{where}: source"), supports, ops, file)


def _load(text: str, file: str) -> Any:
    try:
        return safe_yaml(text)
    except YAMLError as exc:
        raise MpsimInputError(f"engine file {file}: {yaml_problem(exc)}") from None


def _merged(doc: Any, file: str, parent: Callable[[str], tuple[str, str]] | None,
            chain: tuple[str, ...]) -> dict[str, Any]:
    """The file's own keys, or, for a file that `extends` NAME, NAME's supports and ops with the
    file's supports and whole ops in their place (name, description and source always its own)."""
    where = f"engine file {file}"
    if not (isinstance(doc, dict) and "extends" in doc):
        return _mapping(doc, where, TOP_KEYS, required=TOP_KEYS)
    doc = _mapping(doc, where, CHILD_KEYS, required=("extends", "name", "description", "source"))
    base = _text(doc["extends"], f"{where}: extends")
    if parent is None:
        raise MpsimInputError(f"{where}: extends {base!r}, but no engine files are there to extend")
    text, base_file = parent(base)
    if base_file in chain:
        raise MpsimInputError(f"{where}: extends {base!r} in a cycle ({' -> '.join((*chain, base_file))})")
    up = _merged(_load(text, base_file), base_file, parent, (*chain, base_file))
    ops = dict(_mapping(up["ops"], f"engine file {base_file}: ops", OPS))
    ops.update(_mapping(doc.get("ops", {}), f"{where}: ops", OPS))
    return {"name": doc["name"], "description": doc["description"], "source": doc["source"],
            "supports": doc.get("supports", up["supports"]), "ops": ops}


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
    doc = _mapping(value, where, ("weights", "kv_cache"), required=("weights", "kv_cache"))
    weights = _mapping(doc["weights"], f"{where}.weights", W_FORMATS)
    if "fp16" not in weights:
        raise MpsimInputError(f"{where}.weights: every engine runs fp16 weights (lm_head); add fp16")
    out: list[tuple[str, tuple[int | None, ...] | None]] = []
    anyprec: tuple[int, ...] = ()
    for fmt, spec in weights.items():
        here = f"{where}.weights.{fmt}"
        if fmt == "fp16" or fmt in FIXED_SCALES:
            _mapping(spec or {}, here, ())
            out.append((fmt, ()))
        elif fmt == "fp8":
            scales = _mapping(spec, here, ("scales",), ("scales",))["scales"]
            if not isinstance(scales, list) or not scales or any(x not in ("tensor", "row") for x in scales):
                raise MpsimInputError(f"{here}.scales: expected a non-empty list of 'tensor' and 'row', "
                                      f"got {scales!r}")
            out.append((fmt, tuple(None if x == "tensor" else 0 for x in scales)))
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
    kv = doc["kv_cache"]
    if not isinstance(kv, list) or not kv or any(k not in KV_CACHES for k in kv):
        raise MpsimInputError(f"{where}.kv_cache: expected a non-empty list of {list(KV_CACHES)}, got {kv!r}")
    if "kv16" not in kv:
        raise MpsimInputError(f"{where}.kv_cache: every engine runs a 16-bit KV cache; add kv16")
    return Supports(tuple(out), anyprec, tuple(kv))


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
            formats = supports.kv_caches
        else:
            formats = ("any",)
        per_format = _mapping(doc[op], here, formats, required=formats)
        kernels = (*kernels_by_op[op], FUSED) if op in FUSABLE_OPS else kernels_by_op[op]
        out.append((op, tuple((f, _choices(per_format[f], f"{here}.{f}", (*kernels, NONE),
                                           kernels_by_op["act_quant"] if op == "gemm" else None,
                                           kernels_by_op["pre_scale"] if op == "gemm" else ()))
                              for f in formats)))
    return tuple(out)


def _activations(doc: dict[str, Any], here: str, kernel: str, quantizers: tuple[str, ...] | None,
                 prescalers: tuple[str, ...] = ()) -> tuple[str, str | None]:
    """(a_dtype, act_quant) of a choice: 16-bit activations need no quantizer, but may be scaled
    per channel first by one of `prescalers` (a launch with a 16-bit output, e.g. AWQ's pre-quant
    scale); others name their quantizer."""
    a_dtype, quant = doc.get("a_dtype", "fp16"), doc.get("act_quant")
    if quantizers is None:
        if "a_dtype" in doc or quant is not None:
            raise MpsimInputError(f"{here}: a_dtype and act_quant describe GEMM choices only")
        return "fp16", None
    if a_dtype not in A_DTYPES:
        raise MpsimInputError(f"{here}.a_dtype: {a_dtype!r} is not one of {list(A_DTYPES)}")
    if a_dtype == "fp16" or kernel == NONE:
        if quant is not None and (quant not in prescalers or kernel == NONE):
            raise MpsimInputError(f"{here}.act_quant: 16-bit activations are not quantized (only "
                                  f"scaled per channel by one of {list(prescalers)}); got {quant!r}")
        return a_dtype, quant
    if quant not in (*quantizers, FUSED):
        raise MpsimInputError(f"{here}.act_quant: {a_dtype} activations need the kernel that quantizes "
                              f"them; expected one of {[*quantizers, FUSED]}, got {quant!r}")
    return a_dtype, quant


def _choices(value: Any, where: str, kernels: tuple[str, ...],
             quantizers: tuple[str, ...] | None = None,
             prescalers: tuple[str, ...] = ()) -> tuple[Choice, ...]:
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
        max_m, n_mult, k_mult = (doc.get(key) for key in ("max_m", "n_multiple", "k_multiple"))
        for key, v in (("max_m", max_m), ("n_multiple", n_mult), ("k_multiple", k_mult)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise MpsimInputError(f"{here}.{key}: expected a whole number >= 1, got {v!r}")
        arch = ARCHES if "arch" not in doc else _arches(doc["arch"], f"{here}.arch")
        stands = doc.get("stands_in_for")
        if kernel in (FUSED, NONE) and stands is not None:
            raise MpsimInputError(f"{here}: a {kernel} op stands in for nothing; drop stands_in_for")
        a_dtype, quant = _activations(doc, here, kernel, quantizers, prescalers)
        methods = None if "methods" not in doc else _methods(doc["methods"], f"{here}.methods")
        out.append(Choice(kernel, _text(doc["source"], f"{here}.source"), max_m, arch,
                          None if stands is None else _text(stands, f"{here}.stands_in_for"),
                          a_dtype, quant, n_mult, k_mult, methods))
    for a in ARCHES:
        if not any(c.every_shape and a in c.arch for c in out):
            raise MpsimInputError(f"{where}: no choice covers every M on {a}; end the list with a "
                                  f"choice without max_m (or n_multiple, k_multiple, methods) for {a}")
    return tuple(out)


def _methods(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or any(m not in QUANT_METHODS for m in value):
        raise MpsimInputError(f"{where}: expected a non-empty list of {list(QUANT_METHODS)}, got "
                              f"{value!r}")
    return tuple(value)


def check_method(method: str | None) -> None:
    """One clear error for a quantization method no engine file knows."""
    if method is not None and method not in QUANT_METHODS:
        raise MpsimInputError(f"unknown quantization method {method!r}; expected one of "
                              f"{list(QUANT_METHODS)}")


def _arches(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or any(a not in ARCHES for a in value):
        raise MpsimInputError(f"{where}: expected a non-empty list of {list(ARCHES)}, got {value!r}")
    return tuple(value)
