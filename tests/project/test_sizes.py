"""Size discipline: every Python file of the project at most 400 lines, every function at most 60,
and docs/design.md (the map) under 170 lines (150 until issue 21 put the measurement protocol in
its data flow and the calibration room in its layout).

Counted with `ast` over the package folders and tests/ (a function's lines run from its `def` to
its last statement; nested functions count inside their parent too).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("mpsim", "traces", "hw_models", "kernels", "reference", "analysis", "tests")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def python_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_files_are_at_most_400_lines() -> None:
    long = [f"{p.relative_to(ROOT)}: {n}" for p in python_files()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert python_files() and not long, f"files over {MAX_FILE_LINES} lines: {long}"


def test_functions_are_at_most_60_lines() -> None:
    long = []
    for p in python_files():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(ROOT)}:{node.lineno} {node.name}: {n}")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


DESIGN_MAX_LINES = 170


def test_the_design_doc_stays_short() -> None:
    lines = len((ROOT / "docs" / "design.md").read_text().splitlines())
    assert lines < DESIGN_MAX_LINES, (f"docs/design.md has {lines} lines; the map reads in under "
                                      f"{DESIGN_MAX_LINES}")
