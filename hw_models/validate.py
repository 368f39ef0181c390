"""Build frozen dataclasses from parsed YAML, checking every key against the field's type.

One generic walker serves every spec class: the dataclass fields *are* the schema, so a new key
is added in one place (schema.py) and is validated, documented by `schema_keys`, and rejected
when misspelled, without touching this module. Field metadata carries the value rules:
`min` (inclusive lower bound; default "must be > 0" for numbers), `max` (inclusive upper
bound) and `keys` (the allowed keys of a mapping field).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

from mpsim.hw_models.errors import HardwareFileError

T = TypeVar("T")


class _Where:
    """The file being read, so every error names it."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, reason: str) -> HardwareFileError:
        return HardwareFileError(f"{self.file}: {path or '(top level)'}: {reason}")


def build(cls: type[T], data: object, file: str, path: str = "") -> T:
    """Construct dataclass `cls` from `data` (a parsed YAML mapping); errors name file and key."""
    return _build(cls, data, _Where(file), path)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _build(cls: type[T], data: object, where: _Where, path: str) -> T:
    if not isinstance(data, Mapping):
        raise where.fail(path, f"must be a mapping of keys to values, got {_describe(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            expected = ", ".join(sorted(fields))
            raise where.fail(_join(path, key), f"unknown key; expected one of: {expected}")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        key_path = _join(path, name)
        if name not in data:
            if _has_default(field):
                continue
            raise where.fail(key_path, "missing")
        values[name] = _convert(hints[name], data[name], field.metadata, where, key_path)
    return cls(**values)


def _has_default(field: dataclasses.Field[Any]) -> bool:
    no_default = field.default is dataclasses.MISSING
    no_factory = field.default_factory is dataclasses.MISSING
    return not (no_default and no_factory)


def _convert(tp: Any, value: object, meta: Mapping[str, Any], where: _Where, path: str) -> Any:
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where, path)  # type: ignore[arg-type]
    if origin is typing.Literal:
        return _literal(tp, value, where, path)
    if origin in (Union, types.UnionType):
        return _optional(tp, value, meta, where, path)
    if origin is tuple:
        return _tuple(tp, value, meta, where, path)
    if origin is dict:
        return _mapping(tp, value, meta, where, path)
    if tp is str:
        return _string(value, where, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise where.fail(path, f"must be true or false, got {_describe(value)}")
        return value
    if tp in (int, float):
        return _number(tp, value, meta, where, path)
    raise TypeError(f"schema field {path} has unsupported type {tp!r}")


def _literal(tp: Any, value: object, where: _Where, path: str) -> object:
    allowed = get_args(tp)
    if value not in allowed:
        raise where.fail(path, f"must be one of {list(allowed)}, got {value!r}")
    return value


def _optional(tp: Any, value: object, meta: Mapping[str, Any], where: _Where, path: str) -> Any:
    inner = [a for a in get_args(tp) if a is not type(None)]
    if value is None:
        return None
    if len(inner) != 1:
        raise TypeError(f"schema field {path} has unsupported union {tp!r}")
    return _convert(inner[0], value, meta, where, path)


def _tuple(tp: Any, value: object, meta: Mapping[str, Any], where: _Where, path: str) -> tuple:
    if not isinstance(value, list) or not value:
        raise where.fail(path, f"must be a non-empty list, got {_describe(value)}")
    item_type = get_args(tp)[0]
    return tuple(
        _convert(item_type, item, meta, where, f"{path}[{i}]") for i, item in enumerate(value)
    )


def _mapping(tp: Any, value: object, meta: Mapping[str, Any], where: _Where, path: str) -> dict:
    if not isinstance(value, Mapping) or not value:
        raise where.fail(path, f"must be a non-empty mapping, got {_describe(value)}")
    key_type, value_type = get_args(tp)
    allowed = meta.get("keys")
    out = {}
    for key, item in value.items():
        key_path = _join(path, key)
        if type(key) is not key_type:
            want = key_type.__name__
            raise where.fail(key_path, f"key must be {want}, got {_describe(key)}")
        if allowed is not None and key not in allowed:
            expected = ", ".join(str(k) for k in sorted(allowed))
            raise where.fail(key_path, f"unknown key; expected one of: {expected}")
        out[key] = _convert(value_type, item, meta, where, key_path)
    return out


def _string(value: object, where: _Where, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.fail(path, f"must be a non-empty string, got {_describe(value)}")
    return value


def _number(tp: type, value: object, meta: Mapping[str, Any], where: _Where, path: str) -> Any:
    # bool is an int subclass in Python; `true` for a size is always a typo in a hardware file.
    ok = isinstance(value, int) if tp is int else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        raise where.fail(path, f"must be {tp.__name__}, got {_describe(value)}")
    assert isinstance(value, (int, float))
    if not math.isfinite(value):
        raise where.fail(path, f"must be finite, got {value!r}")
    low = meta.get("min")
    if low is None and value <= 0:
        raise where.fail(path, f"must be > 0, got {value!r}")
    if low is not None and value < low:
        raise where.fail(path, f"must be >= {low}, got {value!r}")
    high = meta.get("max")
    if high is not None and value > high:
        raise where.fail(path, f"must be <= {high}, got {value!r}")
    return tp(value)


def _describe(value: object) -> str:
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{type(value).__name__} {text}"


def schema_keys(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, type name) for every key of `cls`, nested blocks expanded; for the docs."""
    out: list[tuple[str, str]] = []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        tp = hints[field.name]
        key = _join(prefix, field.name)
        if get_origin(tp) in (Union, types.UnionType):  # an optional block: its keys
            inner = [a for a in get_args(tp) if a is not type(None)]
            tp = inner[0] if len(inner) == 1 and dataclasses.is_dataclass(inner[0]) else tp
        if dataclasses.is_dataclass(tp):
            out.extend(schema_keys(tp, key))  # type: ignore[arg-type]
        else:
            out.append((key, _type_name(tp)))
    return out


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
