"""pyproject.toml's package list, package-dir mapping and package data match the folders, so no package
and no data file the code reads can go missing from the wheel (tests/project/test_wheel.py builds it)."""

from __future__ import annotations

import ast
from pathlib import Path

from packaging_tree import (
    NOT_PACKAGE_DATA,
    ROOT,
    data_files_on_disk,
    declared_data_files,
    excluded,
    folder_of,
    folders_without_init,
    package_dirs,
    packages_on_disk,
    setuptools_config,
    wheel_name,
)


def _rel(paths: set[Path] | list[Path]) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in paths)


def test_the_package_list_is_every_package_folder() -> None:
    listed = setuptools_config()["packages"]
    on_disk = packages_on_disk()
    assert len(listed) == len(set(listed)), "a package is listed twice"
    missing, stale = sorted(set(on_disk) - set(listed)), sorted(set(listed) - set(on_disk))
    assert (missing, stale) == ([], []), (
        f"pyproject.toml [tool.setuptools] packages: add {missing}, remove {stale}")


def test_each_listed_package_builds_from_its_own_folder() -> None:
    mapping, on_disk = package_dirs(), packages_on_disk()
    assert "mpsim" in mapping and all(name.startswith("mpsim.") for name in mapping if name != "mpsim")
    assert {name: folder_of(name, mapping) for name in on_disk} == on_disk


def test_no_folder_of_modules_lacks_an_init() -> None:
    assert _rel(folders_without_init()) == [], "add an __init__.py (else setuptools leaves them out)"


def _imported_modules(path: Path) -> set[str]:
    """The mpsim.* modules `path` imports (`import a.b`, `from a.b import c`: a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n == "mpsim" or n.startswith("mpsim.")}


def _packaged(module: str, packages: dict[str, Path]) -> bool:
    """`module` is a listed package or a .py file in one."""
    parent, _, leaf = module.rpartition(".")
    return module in packages or (parent in packages and (packages[parent] / f"{leaf}.py").is_file())


def test_every_mpsim_import_in_the_code_names_a_packaged_module() -> None:
    """An import of mpsim.X that no listed package holds (a module in a folder nobody mapped) fails
    here, not in a user's environment."""
    on_disk = packages_on_disk()
    packages = {name: on_disk[name] for name in setuptools_config()["packages"] if name in on_disk}
    unresolved = sorted(f"{source.relative_to(ROOT)}: {module}"
                        for folder in packages.values() for source in folder.glob("*.py")
                        for module in _imported_modules(source) if not _packaged(module, packages))
    assert unresolved == []


def test_package_data_is_every_data_file_of_the_package_folders() -> None:
    on_disk, declared = data_files_on_disk(), declared_data_files()
    assert _rel(on_disk - declared) == [], (
        "files the wheel would leave out: add them to [tool.setuptools.package-data], or to "
        "NOT_PACKAGE_DATA (tests/packaging_tree.py) with the reason")
    assert _rel({p for p in declared if excluded(p)}) == []


def test_the_files_read_at_run_time_are_package_data() -> None:
    """The resources the code opens through importlib.resources (hw_models/loader.py,
    mpsim/sim/protocols.py, analysis/sweep/*.py, mpsim/models.py, mpsim/tiny/, analysis/demo_report.py)."""
    names = {wheel_name(p) for p in declared_data_files()}
    for needed in ("mpsim/hw_models/h200-sxm.yaml", "mpsim/hw_models/npu-llm.yaml",
                   "mpsim/sim/protocols.yaml", "mpsim/analysis/specs/default.yaml",
                   "mpsim/analysis/specs/serve-demo.yaml",
                   "mpsim/data/tiny/config.json", "mpsim/data/tiny/model.safetensors",
                   "mpsim/data/tiny/scheduler_learned.json", "mpsim/data/tiny/scheduler_learned.safetensors"):
        assert needed in names


def test_each_exclusion_still_names_a_file() -> None:
    stale = [pattern for pattern in NOT_PACKAGE_DATA if not list(ROOT.glob(pattern))]
    assert stale == [], "NOT_PACKAGE_DATA names files that are gone"
