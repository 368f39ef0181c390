"""The wheel a user installs: built from the checkout (`pip wheel .`, offline), it holds every package
and data file of the package folders, and installed into a fresh virtual environment, with no editable
install on its path, `mpsim` runs from it outside the checkout.

The fresh environment gets the dependencies (torch, numba, ...) without installing them again: a .pth
file lists the site-packages folders of the environment running the tests as plain paths. Python adds a
plain path to sys.path without processing the .pth files inside it, so the editable install's import
hook (`__editable__.mpsim-*.pth` in the development environment) stays off, and a package missing from
the wheel fails to import, as it does for a user (`No module named 'mpsim.serve'`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging_tree import (
    ROOT,
    data_files_on_disk,
    expected_wheel_files,
    package_dirs,
    packages_on_disk,
    wheel_name,
)

# one build and one environment, whichever xdist worker runs this file (make unit: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("wheel")

TIMEOUT_S = 300


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    shown = " ".join(cmd)[:300]  # the probe's arguments are long
    assert done.returncode == 0, f"{shown} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout's project files (the build writes build/ and
    *.egg-info next to pyproject.toml: not in the checkout), with this environment's setuptools."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    for rel in package_dirs().values():
        _copy_tree(ROOT / rel, src / rel)
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index",
          "--no-cache-dir", "--quiet", "--wheel-dir", str(base / "dist")], cwd=base)
    (built,) = (base / "dist").glob("mpsim-*.whl")
    return built


def _copy_tree(top: Path, dest: Path) -> None:
    for path in top.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = dest / path.relative_to(top)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())


def test_the_wheel_holds_every_package_and_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = {n.rsplit("/", 1)[1]: z.read(n).decode() for n in names if ".dist-info/" in n}
    held = {n for n in names if ".dist-info/" not in n}
    expected = expected_wheel_files()
    assert (sorted(expected - held), sorted(held - expected)) == ([], []), "(missing, unexpected)"
    assert "mpsim = mpsim.cli:main" in meta["entry_points.txt"]
    assert "mpsim/serve/__init__.py" in held and "mpsim/hw_models/h200-sxm.yaml" in held


@pytest.fixture(scope="module")
def fresh(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed offline (no pip inside it: this
    environment's pip installs into it) and the development environment's dependencies on its path."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv.parent)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
          "--no-cache-dir", "--quiet", str(wheel)], cwd=venv.parent)
    (site,) = (venv / "lib").glob("python*/site-packages")
    (site / "_mpsim_test_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")
    return venv


def _dependency_dirs() -> list[str]:
    """This environment's site-packages folders (its venv's, in the checkout's .venv under `make`, and
    those it reaches); never the checkout itself or tests/, which sys.path also holds here."""
    dirs = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    assert dirs, f"no site-packages folder on sys.path: {sys.path}"
    return dirs


@pytest.fixture(scope="module")
def workdir(fresh: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the checkout, where the installed commands run."""
    folder = tmp_path_factory.mktemp("outside")
    assert not folder.resolve().is_relative_to(ROOT)
    return folder


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    return {**env, "MPSIM_CACHE_DIR": str(workdir / "memo"), "MPLBACKEND": "Agg"}


def _mpsim(fresh: Path, workdir: Path, *args: str) -> str:
    return _run([str(fresh / "bin" / "mpsim"), *args], cwd=workdir, env=_env(workdir)).stdout


PROBE = """
import importlib, json, sys
from importlib import resources
packages, data = json.loads(sys.argv[1]), json.loads(sys.argv[2])
files = {name: importlib.import_module(name).__file__ for name in packages}
found = {name: resources.files(pkg).joinpath(rel).is_file() for name, (pkg, rel) in data.items()}
print(json.dumps({"files": files, "data": found}))
"""


def _resource(name: str, packages: list[str]) -> tuple[str, str]:
    """A wheel file name as (the deepest package holding it, its path inside that package)."""
    owner = max((p for p in packages if name.startswith(p.replace(".", "/") + "/")), key=len)
    return owner, name[len(owner) + 1:]


def test_every_package_and_data_file_loads_from_the_fresh_environment(fresh: Path, workdir: Path) -> None:
    """Each package imports from the fresh environment's site-packages (none from the checkout, none
    missing), and each data file is there for importlib.resources, as the code reads them."""
    packages = sorted(packages_on_disk())
    data = {wheel_name(p): _resource(wheel_name(p), packages) for p in data_files_on_disk()}
    out = _run([str(fresh / "bin" / "python"), "-c", PROBE, json.dumps(packages), json.dumps(data)],
               cwd=workdir, env=_env(workdir)).stdout
    probe = json.loads(out)
    site = next((fresh / "lib").glob("python*/site-packages")).resolve()
    outside = {n: f for n, f in probe["files"].items() if not Path(f).resolve().is_relative_to(site)}
    assert outside == {}, "imported from outside the fresh environment"
    assert len(probe["files"]) == len(packages) >= 20
    assert sorted(n for n, ok in probe["data"].items() if not ok) == []
    assert "mpsim/sim/protocols.yaml" in data


def test_help_runs_from_the_installed_wheel(fresh: Path, workdir: Path) -> None:
    text = _mpsim(fresh, workdir, "--help")
    assert "synth" in text and "serve" in text and "plot" in text


def test_synth_and_simulate_run_from_the_installed_wheel(fresh: Path, workdir: Path) -> None:
    trace = workdir / "t.parquet"
    _mpsim(fresh, workdir, "synth", "--model", "mobilellama-1.4b", "--policy", "w4", "--prompt-len", "16",
           "--gen-len", "3", "--out", trace.name)
    assert trace.stat().st_size > 1000
    text = _mpsim(fresh, workdir, "simulate", trace.name, "--hw", "h200-sxm", "--out", "launches.parquet")
    assert "tokens/s" in text and (workdir / "launches.parquet").is_file()


def test_serve_and_plot_run_from_the_installed_wheel(fresh: Path, workdir: Path) -> None:
    text = _mpsim(fresh, workdir, "serve", "--model", "mobilellama-1.4b", "--policy", "w4+kv8", "--hw",
                  "h200-sxm", "--rate", "50", "--requests", "8", "--prompt-len", "32", "--gen-len", "4",
                  "--perf-model", "roofline", "--out", "serve")
    assert "8 requests" in text and (workdir / "serve" / "iterations.parquet").is_file()
    _mpsim(fresh, workdir, "plot", "serve/iterations.parquet", "--kind", "serve-timeline", "--out", "tl.png")
    assert (workdir / "tl.png").stat().st_size > 10_000
