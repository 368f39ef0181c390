"""The default sweep (analysis/specs/default.yaml, what `make demo` runs), trimmed to what can run here.

The spec asks for the simulator and the roofline; a checkout without the simulator still runs the
roofline, and the caller is told which models were dropped (it prints them; nothing is hidden).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from mpsim.analysis.sweep_models import available_perf_models
from mpsim.analysis.sweep_spec import DEFAULT_PERF_MODELS, SweepSpec, spec_from_dict
from mpsim.errors import MpsimInputError

SPEC_RESOURCE = "specs/default.yaml"


def default_spec_text() -> str:
    return resources.files("mpsim.analysis").joinpath(SPEC_RESOURCE).read_text(encoding="utf-8")


def runnable_spec(path: str | None = None) -> tuple[SweepSpec, list[str]]:
    """The spec at `path` (default: the shipped one) without unrunnable perf models, and those dropped."""
    source = path or f"mpsim.analysis/{SPEC_RESOURCE}"
    try:
        text = Path(path).read_text(encoding="utf-8") if path else default_spec_text()
    except OSError as exc:
        raise MpsimInputError(f"{source}: cannot read sweep spec ({exc.strerror})") from None
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise MpsimInputError(f"{source}: a sweep spec must be a mapping")
    wanted = data.get("perf_models", list(DEFAULT_PERF_MODELS))
    if not isinstance(wanted, list):
        return spec_from_dict(data, source), []  # its validation names the bad value
    runnable = available_perf_models()
    dropped = [m for m in wanted if m not in runnable]
    data["perf_models"] = [m for m in wanted if m in runnable]
    if not data["perf_models"]:
        raise MpsimInputError(f"{source}: none of the perf_models {wanted} can run here "
                              f"(runnable: {', '.join(runnable)})")
    return spec_from_dict(data, source), dropped
