"""Kill -9 a sweep mid-run, rerun it: the table equals an uninterrupted run's, no point computed twice.

The sweep runs in a subprocess (its own session, so the kill takes its worker processes too) with a
deliberately slow performance model, registered by the script, so that the kill lands mid-run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mpsim.analysis.sweep.run import run_sweep
from mpsim.analysis.sweep.spec import parse_spec
from mpsim.analysis.sweep.store import PointStore
from mpsim.sim import PERF_MODELS, PerfModel
from mpsim.sim.replay import replay_roofline

SLOW_S = 0.12
SPEC = """
name: killme
models: [mobilellama-1.4b]
policies: [fp16, w8, w4, w3, ap3, ap4-3]
hardware: [h100-sxm, h200-sxm, npu-llm, npu-edge]
workloads: [{prompt_len: 16, gen_len: 4, batch: 1}]
perf_models: [slow-roofline]
"""
N_POINTS = 6 * 4
SCRIPT = f"""
import multiprocessing, sys, time
from mpsim.sim import PerfModel, register_model
from mpsim.sim.replay import replay_roofline

def slow(rows, hw, params, memo):
    time.sleep({SLOW_S})
    return replay_roofline(rows, hw, params, memo)

register_model("slow-roofline", PerfModel(slow, lambda: "slow-1", "test double"))
multiprocessing.set_start_method("fork")  # the workers inherit the registration above
from mpsim.cli import main
sys.exit(main(["sweep", sys.argv[1], "--out", sys.argv[2], "--workers", "2", "--no-progress"]))
"""


def slow_roofline(rows: pd.DataFrame, hw: Any, params: Any, memo: Any) -> pd.DataFrame:
    time.sleep(SLOW_S)
    return replay_roofline(rows, hw, params, memo)


def _start(spec: Path, out: Path, script: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(script), str(spec), str(out)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_points(store: PointStore, proc: subprocess.Popen[bytes], n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(store.computed_keys()) < n:
        err = proc.stderr.read() if proc.poll() is not None and proc.stderr else b""
        assert proc.poll() is None, f"sweep ended before the kill: {err!r}"
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.02)


def test_killed_sweep_resumes_without_loss_or_rework(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # registered for this test only (the subprocess registers its own in SCRIPT)
    monkeypatch.setitem(PERF_MODELS, "slow-roofline",
                        PerfModel(slow_roofline, lambda: "slow-1", "test double"))
    spec_file, script = tmp_path / "spec.yaml", tmp_path / "run.py"
    spec_file.write_text(SPEC)
    script.write_text(SCRIPT)
    out = tmp_path / "killed"
    store = PointStore(out)
    proc = _start(spec_file, out, script)
    _wait_for_points(store, proc, 6, timeout=90)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, as a crash would
    proc.wait(timeout=30)
    time.sleep(0.3)  # the workers' SIGKILL is delivered asynchronously; let it land before looking
    files_at_kill, logged_at_kill = store.finished(), set(store.computed_keys())
    assert 6 <= len(files_at_kill) < N_POINTS, len(files_at_kill)
    assert not store.results.exists()
    # A worker logs a point just after its file lands; a kill between the two leaves a finished,
    # unlogged point (at most one per worker). It is finished, so it must not be computed again.
    unlogged = files_at_kill - logged_at_kill
    assert len(unlogged) <= 2 and logged_at_kill <= files_at_kill

    resumed = run_sweep(parse_spec(SPEC), out, workers=1, progress=False)
    assert (resumed.computed, resumed.skipped) == (N_POINTS - len(files_at_kill), len(files_at_kill))
    keys = store.computed_keys()
    assert len(keys) == len(set(keys))  # no point computed twice
    assert set(keys) | unlogged == set(parse_spec(SPEC).keys()) and not set(keys) & unlogged
    assert not list((out / "points").glob(".*.tmp"))

    whole = run_sweep(parse_spec(SPEC), tmp_path / "whole", workers=1, progress=False)
    pd.testing.assert_frame_equal(resumed.table, whole.table)
