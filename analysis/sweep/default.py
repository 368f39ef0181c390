"""The default sweep (analysis/specs/default.yaml, what `make demo` runs), or a spec file given instead."""

from __future__ import annotations

from importlib import resources

from mpsim.analysis.sweep.spec import SweepSpec, load_spec, parse_spec

SPEC_RESOURCE = "specs/default.yaml"


def default_spec_text() -> str:
    return resources.files("mpsim.analysis").joinpath(SPEC_RESOURCE).read_text(encoding="utf-8")


def demo_spec(path: str | None = None) -> SweepSpec:
    """The spec at `path`, or the shipped default spec."""
    if path:
        return load_spec(path)
    return parse_spec(default_spec_text(), f"mpsim.analysis/{SPEC_RESOURCE}")
