"""A sweep folder's faults: point files that are not what their name says are discarded with a
warning and recomputed; `kill -9` of a sweep's parent takes its workers with it, and a rerun takes
the lock over; leftover processes holding the lock of a sweep that is gone are stopped.

The kill runs real processes: the sweep in a subprocess (its own session, which the test cleans up
whatever happens) with a deliberately slow performance model registered by the script.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.analysis.sweep.store import PointStore

SPEC = """
name: faults
models: [mobilellama-1.4b]
policies: [fp16, w4]
hardware: [h100-sxm, h200-sxm]
workloads: [{prompt_len: 16, gen_len: 2, batch: 1}]
perf_models: [roofline]
"""
SLOW_SPEC = """
name: killparent
models: [mobilellama-1.4b]
policies: [fp16, w8, w4, w3, ap3, ap4-3]
hardware: [h100-sxm, h200-sxm, npu-llm, npu-edge]
workloads: [{prompt_len: 16, gen_len: 2, batch: 1}]
perf_models: [slow-roofline]
"""
SCRIPT = """
import multiprocessing, sys, time
from mpsim.sim import PerfModel, register_model
from mpsim.sim.replay import replay_roofline

def slow(rows, hw, params, memo):
    time.sleep(float(sys.argv[3]))
    return replay_roofline(rows, hw, params, memo)

register_model("slow-roofline", PerfModel(slow, lambda: "slow-1", "test double"))
multiprocessing.set_start_method("fork")  # the workers inherit the registration above
from mpsim.cli import main
sys.exit(main(["sweep", sys.argv[1], "--out", sys.argv[2], "--workers", "2", "--no-progress", *sys.argv[4:]]))
"""
# Dask's nanny starts its worker processes with its own start method: fork, so they inherit the
# registration of the slow model as the local pool's workers do.
DASK_FORK = {"DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "fork"}
LEFTOVER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, f"{os.getpid()}\\n".encode(), 0)  # the owner record, as a sweep writes it
child = os.fork()
if child == 0:  # a leftover process: it holds the lock after its parent is gone
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # (not the pipe the test reads to its end)
    time.sleep(300)
    os._exit(0)
print(child, flush=True)
os._exit(0)
"""
# the slow sweep's 24 points of POINT_S take 12 s on its 2 workers and the parent dies after the
# first, so its workers have >= 10 s of work left: gone within 6 s, they were stopped (3 s with
# 0.5 s points was short of a --dask local sweep's nanny on a loaded 2-core machine: 3.03 s once)
POINT_S = "1.0"
GONE_WITHIN_S = 6.0


def _copy_over_another(points: list[Path]) -> None:
    shutil.copyfile(points[0], points[1])


def _garbage(points: list[Path]) -> None:
    points[1].write_bytes(b"PAR1 not really")


def _edited(points: list[Path]) -> None:
    table = pd.read_parquet(points[1])
    table["tokens_per_s"] *= 2
    table.to_parquet(points[1], index=False)


@pytest.mark.parametrize("damage", [_copy_over_another, _garbage, _edited],
                         ids=["copied over another", "garbage", "edited"])
def test_a_wrong_point_file_is_discarded_and_recomputed(damage: Callable[[list[Path]], None], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = parse_spec(SPEC)
    clean = run_sweep(spec, tmp_path / "clean", workers=1, progress=False)
    out = tmp_path / "damaged"
    run_sweep(spec, out, workers=1, progress=False)
    keys = spec.keys()
    points = [PointStore(out).point_path(k) for k in keys]
    damage(points)
    capsys.readouterr()
    again = run_sweep(spec, out, workers=1, progress=False)
    err = capsys.readouterr().err
    assert f"mpsim: warning: {points[1]}: " in err and "computed again" in err, err
    assert (again.computed, again.skipped) == (1, len(spec) - 1)
    pd.testing.assert_frame_equal(again.table, clean.table)
    assert list(again.table["key"]) == spec.keys()


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process its new parent has not reaped yet is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(("sig", "dask"),
                         [(signal.SIGKILL, False), (signal.SIGTERM, False), (signal.SIGKILL, True)],
                         ids=["kill -9", "kill", "kill -9 of a --dask local sweep"])
def test_killing_the_parent_takes_its_workers_and_a_rerun_takes_the_lock_over(sig: int, dask: bool,
                                                                              tmp_path: Path) -> None:
    spec, script, out = tmp_path / "spec.yaml", tmp_path / "run.py", tmp_path / "sweep"
    spec.write_text(SLOW_SPEC)
    script.write_text(SCRIPT)
    extra, env = (["--dask", "local"], {**os.environ, **DASK_FORK}) if dask else ([], None)
    proc = subprocess.Popen([sys.executable, str(script), str(spec), str(out), POINT_S, *extra],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    try:
        _wait(lambda: proc.poll() is not None or (len(_children(proc.pid)) >= 2
              and bool(PointStore(out).computed_keys())), 120, "the sweep started no workers")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        workers = _children(proc.pid)
        os.kill(proc.pid, sig)  # the parent only, as `kill [-9] PID` does
        proc.wait(timeout=30)
        _wait(lambda: not any(_running(w) for w in workers), GONE_WITHIN_S, "workers outlived their parent")
        rerun = subprocess.run([sys.executable, str(script), str(spec), str(out), "0"], capture_output=True,
                               text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert f"{out}: took over the lock of a sweep that is gone (pid {proc.pid})" in rerun.stderr
        assert len(pd.read_parquet(out / "results.parquet")) == 24
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever this test started, gone
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_leftover_holders_of_a_dead_sweeps_lock_are_stopped(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    out.mkdir()
    helper = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(out / ".lock")], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)
    try:
        leftover = int(helper.communicate(timeout=60)[0])
        assert _running(leftover)
        outcome = run_sweep(parse_spec(SPEC), out, workers=1, progress=False)
        err = capsys.readouterr().err
        taken = f"took over the lock of a sweep that is gone (pid {helper.pid}); stopped 1 leftover"
        assert taken in err, err
        assert f"[{leftover}]" in err
        assert len(outcome.table) == 4
        _wait(lambda: not _running(leftover), 10, "the leftover holder was not stopped")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(helper.pid, signal.SIGKILL)
