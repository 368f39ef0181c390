"""Outputs that cannot be written: one clear error (exit 2, the path named, no traceback), and no
partial or temporary file left, for every command that writes.

Three faults, each over the commands: the output under a regular file (how an unwritable path is
made when the tests run as root, where chmod does not stop a write), the output naming the wrong
kind of thing (a folder for a file, a file for a folder), and a full disk (a file-size limit,
RLIMIT_FSIZE with SIGXFSZ ignored, in a subprocess: every write past the limit fails with EFBIG).
A failed write leaves what was there before as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hf_folder import make_hf_folder

from mpsim.cli import main

SPEC = """
name: faults
models: [mobilellama-1.4b]
policies: [fp16]
hardware: [h200-sxm]
workloads: [{prompt_len: 16, gen_len: 2, batch: 1}]
perf_models: [roofline]
"""
MEASURED = "op,m,n,k,w_format,w_bits,measured_us,protocol\n" + "".join(
    f"gemm,{m},4096,4096,fp16,16,{10 + m},graph\n" for m in range(1, 13))  # rows: a CSV of > 1000 bytes
VALIDATION_TABLE = "op,measured_s,predicted_s\ngemm,1e-5,1.1e-5\nattention,2e-5,1.8e-5\n"
GEN = ["--prompt-len", "16", "--gen-len", "2"]
SERVE = ["--model", "mobilellama-1.4b", "--policy", "fp16", "--hw", "h200-sxm", "--rate", "1",
         "--requests", "2", "--prompt-len", "16", "--gen-len", "4"]
EVALUATE = ["--policies", "fp16,ap4,ap3", "--schedulers", "uniform-high", "--hw", "h200-sxm", "--val-samples",
            "2", "--test-samples", "2", "--gen-len", "4", "--prompt-len", "16", "--segments", "2",
            "--perf-model", "roofline"]
def _validate(inputs: dict[str, Path]) -> list[str]:
    return ["validate", "--against", str(inputs["measured"]), "--hw", "h200-sxm", "--no-cache"]


# command -> (output kind, its name, a file the folder output holds, argv given the inputs and the output)
Argv = Callable[[dict[str, Path], str], list[str]]
COMMANDS: dict[str, tuple[str, str, str | None, Argv]] = {
    "synth": ("file", "t.parquet", None, lambda i, out: ["synth", "--model", "mobilellama-1.4b", "--policy",
                                                         "fp16", *GEN, "--out", out]),
    "simulate": ("file", "launches.parquet", None, lambda i, out: ["simulate", str(i["trace"]), "--hw",
                                                                   "h100-sxm", "--no-cache", "--out", out]),
    "roofline": ("file", "bounds.csv", None, lambda i, out: ["roofline", str(i["trace"]), "--hw", "h100-sxm",
                                                             "--out", out]),
    "plot": ("file", "fig.png", None, lambda i, out: ["plot", str(i["table"]), "--kind", "validation",
                                                      "--out", out]),
    "validate --out": ("file", "rows.csv", None, lambda i, out: [*_validate(i), "--out", out]),
    "validate --plot": ("file", "fig.png", None, lambda i, out: [*_validate(i), "--plot", out]),
    "sweep": ("folder", "out", None, lambda i, out: ["sweep", str(i["spec"]), "--out", out, "--workers", "1",
                                                     "--no-progress"]),
    "serve": ("folder", "out", "summary.json", lambda i, out: ["serve", *SERVE, "--out", out]),
    "quantize": ("folder", "out", "config.json", lambda i, out: ["quantize", "--model", str(i["hf"]),
                                                                 "--policy", "w4", "--out", out]),
    "evaluate": ("folder", "out", "evaluation.md", lambda i, out: ["evaluate", *EVALUATE, "--out", out]),
    "demo": ("folder", "out", None, lambda i, out: ["demo", "--out", out, "--no-progress", "--no-evaluation",
                                                    "--no-serving"]),
}
NUMBA_COMMANDS = ("evaluate", "quantize")  # they compile numba functions (cached on disk) as they run
FULL_DISK_COMMANDS = [c for c in COMMANDS if c != "demo"]  # (the demo's whole sweep: minutes)
FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
from mpsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    (root / "spec.yaml").write_text(SPEC)
    (root / "measured.csv").write_text(MEASURED)
    (root / "table.csv").write_text(VALIDATION_TABLE)
    assert main(["synth", "--model", "mobilellama-1.4b", "--policy", "w4", *GEN, "--out",
                 str(root / "t.parquet")]) == 0
    return {"spec": root / "spec.yaml", "measured": root / "measured.csv", "table": root / "table.csv",
            "hf": make_hf_folder(root / "hf", layers=1), "trace": root / "t.parquet"}


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if ".tmp" in p.name or p.name.endswith(".old"))


def _check_error(rc: int, err: str, out: Path) -> None:
    assert rc == 2, err
    assert f"mpsim: error: cannot write {out}" in err, err
    assert "Traceback" not in err, err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_under_a_file_is_one_clear_error(command: str, inputs: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "blocker").write_text("a file")
    _, name, _, argv = COMMANDS[command]
    out = tmp_path / "blocker" / "sub" / name
    rc = main(argv(inputs, str(out)))
    err = capsys.readouterr().err
    _check_error(rc, err, out)
    assert f"{tmp_path / 'blocker'} is a file, not a folder" in err
    assert (tmp_path / "blocker").read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_of_the_wrong_kind_is_one_clear_error(command: str, inputs: dict[str, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    kind, name, _, argv = COMMANDS[command]
    out = tmp_path / name
    if kind == "folder":  # --out names an existing file
        out.write_text("keep me")
    else:  # a file to write where a folder is
        out.mkdir()
    rc = main(argv(inputs, str(out)))
    err = capsys.readouterr().err
    _check_error(rc, err, out)
    assert ("it is a file, not a folder" if kind == "folder" else "it is a folder, not a file") in err
    assert out.read_text() == "keep me" if kind == "folder" else not any(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


@pytest.mark.parametrize("command", FULL_DISK_COMMANDS)
def test_a_full_disk_is_one_clear_error_and_keeps_the_old_output(command: str, inputs: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    kind, name, owned, argv = COMMANDS[command]
    out = tmp_path / "results" / name
    out.parent.mkdir()
    old = out / owned if owned else out if kind == "file" else None
    if old is not None:  # what an earlier run left: a failed write must leave it whole
        old.parent.mkdir(exist_ok=True)
        old.write_text("old")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPSIM_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_INTERPRET": "1"}
    if command in NUMBA_COMMANDS:  # numba's on-disk cache warm, so that the first write is the output's
        assert main(argv(inputs, str(tmp_path / "warm" / name))) == 0
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, *argv(inputs, str(out))], env=env,
                          capture_output=True, text=True, timeout=600)
    _check_error(proc.returncode, proc.stderr, out)
    assert "file too large" in proc.stderr
    assert _leftovers(tmp_path) == []
    if old is not None:
        assert old.read_text() == "old"
        assert kind == "file" or sorted(p.name for p in out.iterdir()) == [old.name]


def test_a_full_disk_under_a_cold_numba_cache_is_one_clear_error(tmp_path: Path) -> None:
    """A write that is not one of mpsim's outputs (numba's cache of a function compiled during the run)
    on a full disk: one line naming that file, exit 2, no traceback."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, "quality", "--model", "tiny", "--policy", "w4",
                           "--samples", "1", "--gen-len", "2", "--prompt-len", "8"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert f"mpsim: error: cannot write {tmp_path / 'numba'}" in proc.stderr, proc.stderr
    assert "file too large" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_serve_rerun_replaces_the_folder_as_a_whole(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "serve"
    assert main(["serve", *SERVE, "--out", str(out), "--timeline"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["iterations.parquet", "requests.parquet", "summary.json",
                                                     "timeline.json"]
    assert main(["serve", *SERVE, "--seed", "1", "--out", str(out)]) == 0  # no timeline this time
    assert sorted(p.name for p in out.iterdir()) == ["iterations.parquet", "requests.parquet", "summary.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve"]  # no temporary sibling left
    (out / "notes.txt").write_text("mine")  # a folder holding other files is not replaced
    assert main(["serve", *SERVE, "--out", str(out)]) == 2
    assert "it holds files this command does not write (notes.txt)" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
