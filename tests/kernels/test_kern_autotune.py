"""GPU-side autotuning of the GEMM/GEMV launchers (kernels/autotune.py, gemm_common.run_gemm).

No GPU here: the selection machinery runs with an injected timer, and one end-to-end case runs the
real launcher under the interpreter with the GPU switch flipped, so that every trial launch really
runs, only the final one is recorded, and its output is right."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from triton.runtime.errors import OutOfResources

from mpsim.kernels import autotune, gemm_common
from mpsim.kernels.gemm_fp16 import gemm_fp16
from mpsim.kernels.launch_config import LaunchConfig, gemm_candidates, gemm_config
from mpsim.reference.exact import gemm_float64
from mpsim.reference.tolerance import assert_close_bound, gemm_bound
from mpsim.traces.recorder import Recorder


def cfg(split: int, bn: int = 32) -> LaunchConfig:
    return LaunchConfig("gemv_fp16_kernel", (4, split), 1, bn, 64, 4, 3, split)


def test_the_fastest_candidate_wins_once_per_key() -> None:
    times = {1: 3.0, 2: 1.0, 4: 1.0, 8: 2.0}
    calls: list[int] = []

    def timer(fn: object) -> float:
        assert callable(fn)
        fn()
        return times[calls[-1]]

    tuner = autotune.Tuner(timer)
    cands = [cfg(s) for s in times]
    best = tuner.best("k", cands, lambda c: calls.append(c.split_k))
    assert best == cfg(2)  # 2 and 4 tie: the first listed wins
    assert calls == [1, 2, 4, 8]
    assert tuner.best("k", cands, lambda c: calls.append(c.split_k)) == cfg(2)
    assert calls == [1, 2, 4, 8]  # cached: nothing timed again
    assert tuner.tuned["k"].timed == 4 and tuner.tuned["k"].ms == 1.0


def test_candidates_the_device_cannot_run_are_skipped_and_named() -> None:
    def timer(fn: object) -> float:
        raise OutOfResources(232448, 101376, "shared memory")

    tuner = autotune.Tuner(lambda fn: 1.0)
    assert tuner.best("ok", [cfg(1)], lambda c: None) == cfg(1)
    failing = autotune.Tuner(timer)
    with pytest.raises(RuntimeError, match=r"autotune \('fp16', 1\): no candidate could launch: "
                       r".*shared memory"):
        failing.best(("fp16", 1), [cfg(1), cfg(2)], lambda c: None)

    def some(fn: object) -> float:
        assert callable(fn)
        fn()
        return 1.0

    seen: list[LaunchConfig] = []

    def trial(c: LaunchConfig) -> None:
        seen.append(c)
        if c.split_k == 1:
            raise OutOfResources(1, 0, "registers")

    mixed = autotune.Tuner(some)
    assert mixed.best("m", [cfg(1), cfg(2)], trial) == cfg(2)
    assert len(mixed.tuned["m"].skipped) == 1 and "registers" in mixed.tuned["m"].skipped[0]


@pytest.mark.parametrize(("value", "on"), [("", True), ("1", True), ("on", True), ("0", False),
                                           ("false", False), ("OFF", False)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv(autotune.ENV, value)
    assert autotune.enabled() is on


def test_a_bad_switch_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(autotune.ENV, "sometimes")
    with pytest.raises(ValueError, match="MPSIM_AUTOTUNE='sometimes': expected 1/0"):
        autotune.enabled()


def test_architectures() -> None:
    assert autotune.gpu_arch((9, 0)) == "hopper"
    assert autotune.gpu_arch((10, 0)) == "hopper"
    assert autotune.gpu_arch((8, 9)) == "ampere"
    assert autotune.gpu_arch((8, 0)) == "ampere"
    with pytest.raises(ValueError, match=r"compute capability 7\.5"):
        autotune.gpu_arch((7, 5))


RECORD = dict(m=1, n=4096, k=4096, w_format="int4-group", w_bits=4, group_size=128, bias=False)


def test_without_a_gpu_the_heuristic_runs_and_nothing_is_timed() -> None:
    trials: list[LaunchConfig] = []
    got = gemm_common.choose_config(RECORD, torch.device("cpu"), trials.append)
    assert got == gemm_config(1, 4096, 4096, "int4-group", 4, 128, on_gpu=False)
    assert trials == []


def fake_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int],
             timer: autotune.Timer) -> autotune.Tuner:
    tuner = autotune.Tuner(timer)
    monkeypatch.setattr(gemm_common.runtime, "on_gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(autotune, "TUNER", tuner)
    return tuner


def test_on_a_gpu_every_candidate_of_its_architecture_is_tried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trials: list[LaunchConfig] = []

    def timer(fn: object) -> float:
        assert callable(fn)
        fn()
        c = trials[-1]
        return 1.0 + abs((c.block_n or 0) - 64) + abs(c.split_k - 2)  # 64-row tiles, split 2

    fake_gpu(monkeypatch, (9, 0), timer)
    monkeypatch.delenv(autotune.ENV, raising=False)
    got = gemm_common.choose_config(RECORD, torch.device("cpu"), trials.append)
    want = gemm_candidates(1, 4096, 4096, "int4-group", 4, 128, "hopper")
    assert trials == want
    assert (got.block_n, got.split_k) == (64, 2) and got in want
    monkeypatch.setenv(autotune.ENV, "0")
    assert gemm_common.choose_config(RECORD, torch.device("cpu"), trials.append) == gemm_config(
        1, 4096, 4096, "int4-group", 4, 128)


def test_trials_run_for_real_and_only_the_chosen_launch_is_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher under the interpreter with the GPU switch flipped: each candidate launches
    (unrecorded), the pick runs once more inside the capture, and the row carries its config."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 256)).astype(np.float16)
    w = (rng.standard_normal((64, 256)) * 0.1).astype(np.float16)
    ran: list[int] = []

    def timer(fn: object) -> float:
        assert callable(fn)
        fn()
        ran.append(1)
        return 10.0 - len(ran)  # the last candidate is the fastest

    tuner = fake_gpu(monkeypatch, (8, 0), timer)
    monkeypatch.setattr(gemm_common.runtime, "device", lambda: torch.device("cpu"))
    monkeypatch.delenv(autotune.ENV, raising=False)
    with Recorder() as rec:
        y = gemm_fp16(torch.from_numpy(x), torch.from_numpy(w))
    rows = rec.finish()
    cands = gemm_candidates(1, 64, 256, "fp16", 16, None, "ampere")
    assert len(ran) == len(cands) > 3
    assert len(rows) == 1
    (tuned,) = tuner.tuned.values()
    assert tuned.config == cands[-1]
    assert rows[0]["kernel"] == tuned.config.kernel
    assert json.loads(rows[0]["grid"]) == list(tuned.config.grid)
    assert json.loads(rows[0]["config"]) == tuned.config.config_dict()
    xw = x.astype(np.float64)
    assert_close_bound(y.numpy(), gemm_float64(xw, w), gemm_bound(xw, w), "tuned fp16 GEMV")
