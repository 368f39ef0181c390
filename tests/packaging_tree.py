"""What the wheel must hold, read from the checkout's folders, and what pyproject.toml declares.

Shared by tests/project/test_packaging.py (the declarations against the folders) and
tests/project/test_wheel.py (a built wheel against the folders)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]

# Files under the package folders that are not package data (the wheel leaves them out), and why.
NOT_PACKAGE_DATA = {
    "analysis/results/*.csv": "tables the analysis/bench scripts write into the checkout; no installed "
                              "code reads them",
    "traces/data/README.md": "tells developers what the folder is for",
}


def setuptools_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        tool: dict[str, Any] = tomllib.load(f)["tool"]["setuptools"]
    return tool


def package_dirs() -> dict[str, str]:
    """pyproject's package-dir: package name -> folder (relative to the checkout)."""
    return dict(setuptools_config()["package-dir"])


def folder_of(package: str, mapping: dict[str, str]) -> Path:
    """The folder setuptools builds `package` from: its longest mapped prefix's folder + the rest."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in mapping:
            return ROOT / mapping[prefix] / Path(*parts[cut:])
    return ROOT / Path(*parts)


def _walk(folder: Path) -> list[Path]:
    """Every file under `folder`, bytecode caches left out."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def packages_on_disk() -> dict[str, Path]:
    """Every folder with an __init__.py under the mapped folders, by its mpsim.* name."""
    found: dict[str, Path] = {}
    for name, rel in package_dirs().items():
        top = ROOT / rel
        for init in _walk(top):
            if init.name == "__init__.py":
                sub = init.parent.relative_to(top).parts
                found[".".join((name, *sub))] = init.parent
    return found


def folders_without_init() -> list[Path]:
    """Folders that hold Python modules but no __init__.py: setuptools would leave them out."""
    folders = {p.parent for rel in package_dirs().values() for p in _walk(ROOT / rel) if p.suffix == ".py"}
    return sorted(f for f in folders if not (f / "__init__.py").is_file())


def excluded(path: Path) -> bool:
    rel = path.relative_to(ROOT)
    return any(rel.match(pattern) for pattern in NOT_PACKAGE_DATA)


def data_files_on_disk() -> set[Path]:
    """Every file under the mapped folders that is not Python source and not in NOT_PACKAGE_DATA."""
    return {p for rel in package_dirs().values() for p in _walk(ROOT / rel)
            if p.suffix not in (".py", ".pyc") and not excluded(p)}


def declared_data_files() -> set[Path]:
    """The files pyproject's package-data globs select (relative to each package's folder)."""
    mapping = package_dirs()
    return {p for package, patterns in setuptools_config().get("package-data", {}).items()
            for pattern in patterns for p in folder_of(package, mapping).glob(pattern) if p.is_file()}


def wheel_name(path: Path) -> str:
    """The name a file of the checkout has in the wheel (hw_models/h200-sxm.yaml ->
    mpsim/hw_models/h200-sxm.yaml), through the longest package-dir folder holding it."""
    best = max(((name, ROOT / rel) for name, rel in package_dirs().items()
                if path.is_relative_to(ROOT / rel)), key=lambda item: len(item[1].parts))
    return "/".join((*best[0].split("."), *path.relative_to(best[1]).parts))


def expected_wheel_files() -> set[str]:
    """What the wheel must hold besides its .dist-info: every module of every package, every data file."""
    py = {p for folder in packages_on_disk().values() for p in folder.glob("*.py")}
    return {wheel_name(p) for p in py | data_files_on_disk()}
