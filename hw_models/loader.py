"""Find, read and validate hardware files: `load_hardware(name_or_path)`, `list_hardware()`.

A shipped device is named by its file stem ("h200-sxm"); anything ending in .yaml/.yml or
containing a path separator is read as a user's file. YAML is parsed with safe_load (files
come from other people), then built into the frozen dataclasses of schema.py, then checked
across keys: every source id cited exists, and a few relations that a typo would break.
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.schema import Block, GpuSpec, NpuSpec
from mpsim.hw_models.validate import build
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem

_PACKAGE = "mpsim.hw_models"
_SPEC_BY_KIND: dict[str, type[GpuSpec] | type[NpuSpec]] = {"gpu": GpuSpec, "npu": NpuSpec}
REQUIRED_DECODER_BITS = (2, 3, 4, 8, 16)
REQUIRED_ANYPREC_BITS = (2, 3, 4, 8)


def list_hardware() -> list[str]:
    """Names of the shipped hardware files, sorted."""
    root = resources.files(_PACKAGE)
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_hardware(name_or_path: str) -> GpuSpec | NpuSpec:
    """Load a shipped device by name ("h200-sxm") or a user's YAML file by path."""
    if _looks_like_path(name_or_path):
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise HardwareFileError(f"{path}: cannot read hardware file: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise HardwareFileError(f"{path}: not a text (UTF-8) file: byte {exc.start}: "
                                    "expected a hardware YAML file") from None
        return parse_hardware(text, str(path))
    names = list_hardware()
    if name_or_path not in names:
        raise HardwareFileError(
            f"unknown hardware {name_or_path!r}; shipped: {', '.join(names)} "
            "(or give a path to a .yaml file)"
        )
    resource = resources.files(_PACKAGE).joinpath(f"{name_or_path}.yaml")
    return parse_hardware(resource.read_text(encoding="utf-8"), f"{name_or_path}.yaml")


def _looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml")) or "/" in text or "\\" in text


def parse_hardware(text: str, file: str) -> GpuSpec | NpuSpec:
    """Validate YAML text (named `file` in errors) into a GpuSpec or NpuSpec."""
    try:
        data = safe_yaml(text)
    except YAMLError as exc:
        raise HardwareFileError(f"{file}: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise HardwareFileError(f"{file}: (top level): must be a mapping of keys, got {kind}")
    if "kind" not in data:
        raise HardwareFileError(f"{file}: kind: missing; expected one of: gpu, npu")
    kind = data["kind"]
    if not isinstance(kind, str) or kind not in _SPEC_BY_KIND:
        raise HardwareFileError(f"{file}: kind: must be one of ['gpu', 'npu'], got {kind!r}")
    spec = build(_SPEC_BY_KIND[kind], data, file)
    _check_name(spec.name, file)
    _check_sources(spec, file)
    _check_relations(spec, file)
    return spec


def _check_name(name: str, file: str) -> None:
    """The name labels tables and names files (`roofline-NAME.png`): no path separators, no leading
    dot (`..`), no control characters."""
    if not name or name.startswith(".") or any(c in "/\\" or ord(c) < 32 for c in name):
        raise HardwareFileError(f"{file}: name: {name!r} cannot name a file; expected a name without "
                                "path separators ('/', '\\'), control characters or a leading '.' "
                                "(e.g. my-gpu)")


def _blocks(obj: object, path: str = "") -> list[tuple[str, Block]]:
    """Every Block inside a spec, with its dotted path."""
    out: list[tuple[str, Block]] = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        key = f"{path}.{f.name}" if path else f.name
        if isinstance(value, Block):
            out.append((key, value))
        if dataclasses.is_dataclass(value):
            out.extend(_blocks(value, key))
    return out


def _check_sources(spec: GpuSpec | NpuSpec, file: str) -> None:
    ids = [s.id for s in spec.sources]
    for i, source_id in enumerate(ids):
        if source_id in ids[:i]:
            raise HardwareFileError(f"{file}: sources[{i}].id: duplicate source id {source_id!r}")
    known = ", ".join(ids)
    for path, block in _blocks(spec):
        if block.source not in ids:
            raise HardwareFileError(
                f"{file}: {path}.source: unknown source id {block.source!r}; known: {known}"
            )
        numbers = {f.name for f in dataclasses.fields(block)} - {"source", "key_sources"}
        for key, source_id in block.key_sources.items():
            if key not in numbers:
                raise HardwareFileError(
                    f"{file}: {path}.key_sources.{key}: unknown key; expected one of: "
                    + ", ".join(sorted(numbers))
                )
            if source_id not in ids:
                raise HardwareFileError(
                    f"{file}: {path}.key_sources.{key}: unknown source id {source_id!r}; "
                    f"known: {known}"
                )


# A datasheet peak vs SMs x FLOP/clk/SM x clock: datasheets round (L40S TF32 183 against 181.0 implied).
PEAK_TOLERANCE = 0.02


def _check_relations(spec: GpuSpec | NpuSpec, file: str) -> None:
    problems = _gpu_problems(spec) if isinstance(spec, GpuSpec) else _npu_problems(spec)
    if problems:
        path, reason = problems[0]
        raise HardwareFileError(f"{file}: {path}: {reason}")


def _energy_problems(spec: GpuSpec | NpuSpec) -> list[tuple[str, str]]:
    e = spec.energy
    if e is not None and e.static_W >= e.tdp_W:
        return [("energy.static_W", f"must be < energy.tdp_W {e.tdp_W}")]
    return []


def _gpu_problems(spec: GpuSpec) -> list[tuple[str, str]]:
    c, sm, tc = spec.compute, spec.sm, spec.tensor_core
    out = _energy_problems(spec)
    if c.base_clock_MHz is not None and c.boost_clock_MHz < c.base_clock_MHz:
        out.append(("compute.boost_clock_MHz", f"must be >= base_clock_MHz {c.base_clock_MHz}"))
    if c.sustained_clock_MHz is not None and c.sustained_clock_MHz > c.boost_clock_MHz:
        out.append(("compute.sustained_clock_MHz", f"must be <= boost {c.boost_clock_MHz}"))
    if sm.max_shared_memory_per_cta_KiB > sm.shared_memory_KiB:
        out.append(("sm.max_shared_memory_per_cta_KiB", "must be <= sm.shared_memory_KiB"))
    if set(tc.dense_peak_TFLOPs) != set(tc.flops_per_clock_per_SM):
        out.append((
            "tensor_core.flops_per_clock_per_SM",
            f"must list the same dtypes as dense_peak_TFLOPs {sorted(tc.dense_peak_TFLOPs)}",
        ))
    if "fp16" not in tc.dense_peak_TFLOPs:
        out.append(("tensor_core.dense_peak_TFLOPs.fp16", "missing"))
    for dtype in sorted(set(tc.dense_peak_TFLOPs) & set(tc.flops_per_clock_per_SM)):
        implied = c.sm_count * tc.flops_per_clock_per_SM[dtype] * tc.datasheet_clock_MHz * 1e-6
        peak = tc.dense_peak_TFLOPs[dtype]
        if abs(peak - implied) > PEAK_TOLERANCE * peak:
            out.append((f"tensor_core.dense_peak_TFLOPs.{dtype}",
                         f"{peak:g} TFLOP/s is not compute.sm_count x flops_per_clock_per_SM x "
                         f"datasheet_clock_MHz = {c.sm_count} x {tc.flops_per_clock_per_SM[dtype]:g} x "
                         f"{tc.datasheet_clock_MHz:g} MHz = {implied:.1f} (within {PEAK_TOLERANCE:.0%}: "
                         "datasheets round); check the rate per SM, the SM count or the clock"))
    return out


def _npu_problems(spec: NpuSpec) -> list[tuple[str, str]]:
    out = _energy_problems(spec)
    bits = spec.weight_decoder.weights_per_cycle
    for b in REQUIRED_DECODER_BITS:
        if b not in bits:
            out.append((f"weight_decoder.weights_per_cycle.{b}", "missing"))
    anyprec = spec.weight_decoder.anyprec_weights_per_cycle
    for b in REQUIRED_ANYPREC_BITS if anyprec is not None else ():
        if b not in anyprec:
            out.append((f"weight_decoder.anyprec_weights_per_cycle.{b}", "missing"))
    if "fp16" not in spec.mac_array.macs_per_pe_per_cycle:
        out.append(("mac_array.macs_per_pe_per_cycle.fp16", "missing"))
    if spec.energy is not None:
        e = spec.energy
        if "fp16" not in e.mac_pJ:
            out.append(("energy.mac_pJ.fp16", "missing"))
        for b in REQUIRED_DECODER_BITS:
            if b not in e.decoder_pJ_per_weight:
                out.append((f"energy.decoder_pJ_per_weight.{b}", "missing"))
    return out
