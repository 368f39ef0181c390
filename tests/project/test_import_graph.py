"""The import graph: no cycles, and imports only run down the floors of docs/design.md.

Modules are nodes, `import`/`from ... import` statements (top-level or inside functions) are edges.
An import under `if TYPE_CHECKING:` is a type edge: it must run down the floors like any other, but
never runs, so the cycle check leaves it out (mpsim/sim/params.py composes the library rooms' params,
and the rooms name SimParams in annotations only).
Floors, lowest first: traces, hw_models and mpsim.opspec -> reference -> kernels -> the core
(errors, limits, models, policy, workload, launch_plan, synth, memory, progress, parallel, the engines
mpsim.engines.* and the kernel library rooms mpsim.library.*) -> sim, engine -> tiny -> quality ->
schedulers -> serve -> analysis -> commands -> cli. A module may import its own group or a lower
floor, never a sibling group on its floor (sim and engine stay apart) nor anything above it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = {"mpsim": "mpsim", "mpsim.traces": "traces", "mpsim.hw_models": "hw_models",
                "mpsim.kernels": "kernels", "mpsim.reference": "reference", "mpsim.analysis": "analysis"}
CORE = ("mpsim.errors", "mpsim.limits", "mpsim.models", "mpsim.policy", "mpsim.workload",
        "mpsim.launch_plan", "mpsim.synth", "mpsim.memory", "mpsim.progress", "mpsim.parallel")
FLOORS: list[tuple[str, ...]] = [
    ("traces", "hw_models", "opspec"),
    ("reference",),
    ("kernels",),
    ("core",),
    ("sim", "engine"),
    ("tiny",),
    ("quality",),
    ("schedulers",),
    ("serve",),
    ("analysis",),
    ("commands",),
    ("cli",),
]
FLOOR = {group: i for i, groups in enumerate(FLOORS) for group in groups}


def modules() -> dict[str, Path]:
    """Every module of the installed namespace, by dotted name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _type_only(tree: ast.Module) -> set[ast.AST]:
    """The import statements inside `if TYPE_CHECKING:` blocks (type edges: never run)."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(n for stmt in node.body for n in ast.walk(stmt))
    return out


def imports(mods: dict[str, Path], *, runtime_only: bool = False) -> dict[str, set[str]]:
    """Import edges by module: every import (floor-checked), or with `runtime_only` those that run
    (cycle-checked; an import under `if TYPE_CHECKING:` serves annotations only)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_only(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if node in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mpsim"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges[name].add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names if a.name.startswith("mpsim"))
    return edges


def group(module: str) -> str:
    if module in CORE or module.split(".")[:2] in (["mpsim", "library"], ["mpsim", "engines"]):
        return "core"
    if module == "mpsim":
        return "cli"  # the package's __init__ sits with the front door
    parts = module.split(".")
    return "cli" if parts[1] == "cli" else parts[1]


def test_every_module_has_a_floor() -> None:
    unplaced = sorted(m for m in modules() if group(m) not in FLOOR)
    assert not unplaced, f"modules outside every floor (add them to FLOORS or CORE): {unplaced}"


def test_imports_run_down_the_floors() -> None:
    mods = modules()
    wrong = []
    for src, targets in imports(mods).items():
        for dst in targets:
            a, b = group(src), group(dst)
            if a != b and FLOOR[b] >= FLOOR[a]:
                wrong.append(f"{src} ({a}, floor {FLOOR[a]}) imports {dst} ({b}, floor {FLOOR[b]})")
    assert not wrong, "imports that do not run down:\n" + "\n".join(sorted(wrong))


def test_only_the_cli_imports_the_commands() -> None:
    outside = sorted(src for src, targets in imports(modules()).items()
                     if any(t.startswith("mpsim.commands") for t in targets)
                     and not src.startswith("mpsim.commands") and src != "mpsim.cli")
    assert not outside, f"modules outside mpsim/commands/ that import it: {outside}"


def test_no_import_cycles() -> None:
    mods = modules()
    edges = {src: {t for t in targets if t in mods}
             for src, targets in imports(mods, runtime_only=True).items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for m in sorted(mods):
        if m not in state and (cycle := visit(m)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_type_checking_imports_are_type_edges(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nfrom mpsim.a import x\n"
                   "if TYPE_CHECKING:\n    from mpsim.b import y\n")
    mods = {"mpsim.m": src}
    assert imports(mods)["mpsim.m"] == {"mpsim.a", "mpsim.b"}
    assert imports(mods, runtime_only=True)["mpsim.m"] == {"mpsim.a"}
