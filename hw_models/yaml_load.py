"""The one way mpsim parses YAML: `safe_yaml(text)`, a safe loader that refuses duplicate keys.

YAML itself says a mapping's keys are unique, but PyYAML keeps the last of two equal keys silently
(`policies: [fp16]` then `policies: [w4]` would sweep w4 alone). Every file mpsim reads (hardware
files, sweep specs, protocols.yaml, calibration files) goes through this loader, so a repeated key is
a `yaml.YAMLError` with its line, reported like any other YAML syntax error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml import YAMLError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

__all__ = ["UniqueKeyLoader", "YAMLError", "safe_yaml", "yaml_problem"]


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader, except that a mapping with a key twice is an error naming the key and line
    (a merge `<<: *anchor` may still be overridden: those keys are not the mapping's own)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base class says so
                break
            if repeated:
                raise ConstructorError("while constructing a mapping", node.start_mark,
                                       f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def safe_yaml(text: str) -> Any:
    """Parse untrusted YAML text: plain data only (yaml.safe_load's types), no duplicate keys."""
    return yaml.load(text, Loader=UniqueKeyLoader)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what: "line 3, column 1: invalid YAML: duplicate key 'kind'"."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(unknown place)"
    return f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}"
