"""Every constant of SimParams names where it came from (issue 24): parsed from the source of
mpsim/sim/params.py, a field passes when its own comment, the comment block right above it or its
section's header names a source kind (fitted rows, an assumption, a datasheet/whitepaper/the CUDA
guide, a hardware-file key, a library room, an approximation/numerical limit). The fields that read
a hardware file are listed, with the keys they combine with; the power model's device-independent
constants name rows of more than one GPU."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.sim import params

SOURCE_KINDS = re.compile(r"fitted on|\brows\b|assumption|datasheet|whitepaper|Programming Guide|"
                          r"hardware file|approximation limits|numerical limit|"
                          r"mpsim/sim/gpu/library", re.IGNORECASE)
# SimParams fields whose formula reads a hardware file, and the keys it reads (power.py).
HARDWARE_READERS = {
    "power_overhead": ("energy.tdp_W", "energy.static_W", "compute.base_clock_MHz",
                       "compute.boost_clock_MHz"),
    "voltage_slope": ("compute.base_clock_MHz",),
}
# device-independent constants of the power model: their comments name rows of more than one GPU
MULTI_GPU = {"power_overhead": ("H200", "H100", "L40S"), "voltage_slope": ("L40S", "H200")}


def field_sources(source: str, cls: str = "SimParams") -> dict[str, str]:
    """Per field of class `cls` in `source`: its inline comment, the comment lines right above it and
    the header line of the section (`# ---- ...`) it sits in."""
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == cls)
    out: dict[str, str] = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        end = stmt.end_lineno or stmt.lineno
        text = [comments.get(i, "") for i in range(stmt.lineno, end + 1)]
        i = stmt.lineno - 1
        while i >= 1 and lines[i - 1].strip().startswith("#"):  # the block right above
            text.append(comments.get(i, ""))
            i -= 1
        j = stmt.lineno - 1
        while j >= 1 and not lines[j - 1].strip().startswith("# ----"):
            j -= 1
        if j >= 1:  # the section's header line
            text.append(comments.get(j, ""))
        out[stmt.target.id] = " ".join(text)
    return out


def unsourced(source: str) -> list[str]:
    return [name for name, text in field_sources(source).items() if not SOURCE_KINDS.search(text)]


PARAMS_SOURCE = Path(params.__file__).read_text()


def test_every_simparams_field_names_its_source() -> None:
    fields = field_sources(PARAMS_SOURCE)
    assert set(fields) == set(params.SimParams.__dataclass_fields__)
    assert unsourced(PARAMS_SOURCE) == []


def test_the_audit_catches_a_constant_without_a_source() -> None:
    bad = PARAMS_SOURCE.replace("    eta_mma: float = 1.0\n",
                                "    eta_mma: float = 1.0\n\n    new_constant: float = 0.5\n")
    assert bad != PARAMS_SOURCE
    assert unsourced(bad) == ["new_constant"]


@pytest.mark.parametrize("field", sorted(HARDWARE_READERS))
def test_fields_that_read_a_hardware_file_name_its_keys(field: str) -> None:
    text = field_sources(PARAMS_SOURCE)[field]
    for key in HARDWARE_READERS[field]:
        assert key in text, (field, key)
    for gpu in MULTI_GPU[field]:
        assert gpu in text, (field, gpu)
    for name in list_hardware():
        hw = load_hardware(name)
        if isinstance(hw, GpuSpec):  # every shipped GPU file carries the keys
            for key in HARDWARE_READERS[field]:
                block, _, attr = key.partition(".")
                assert getattr(getattr(hw, block), attr) is not None, (name, key)
