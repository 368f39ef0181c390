"""Calibration against measured tables: a known perturbation is found again; the file reads back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation import calibration as cal
from mpsim.analysis.validation.constants import (
    apply_hw,
    apply_protocols,
    constants_of,
    read_calibration,
    write_calibration,
)
from mpsim.analysis.validation.measured import read_generic_csv
from mpsim.analysis.validation.predict import predict_rows
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.protocols import shipped

HEADER = "op,m,n,k,tokens,hidden,measured_us,protocol"
SHAPES = [(m, n, k) for m in (1, 4, 16) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008),
                                                     (8192, 8192), (2048, 8192))]


def _measured(tmp_path: Path, hw_name: str, true: cal.Constants) -> pd.DataFrame:
    lines = [f"gemm,{m},{n},{k},,,1.0,graph" for m, n, k in SHAPES]
    lines += [f"rmsnorm,,,,{t},4096,1.0,kernel" for t in (1, 64, 512)]
    path = tmp_path / f"{hw_name}.csv"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    rows = read_generic_csv(path).rows
    hw = load_hardware(hw_name)
    p = predict_rows(rows, apply_hw(hw, true), cache_dir=None,
                     protocols=apply_protocols(shipped(), true))
    noise = 1 + 0.01 * np.random.default_rng(5).standard_normal(len(rows))
    return rows.assign(measured_us=p.predicted_us * noise)


def test_calibration_recovers_a_perturbation_and_predicts_the_other_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "BW_GRID", np.array([0.6, 0.72, 0.84]))
    monkeypatch.setattr(cal, "L2_SCALES", np.array([1.0]))
    monkeypatch.setattr(cal, "GOLDEN_STEPS", 8)
    shipped_h200 = constants_of(load_hardware("h200-sxm"))
    true = dataclasses.replace(shipped_h200, bandwidth_fraction=0.7,
                               protocol_us={**shipped_h200.protocol_us, "graph": 2.5})
    rows = _measured(tmp_path, "h200-sxm", true)
    report = cal.calibrate_rows(rows, load_hardware("h200-sxm"), fit_rows=12, test_rows=6)
    assert report.after.bandwidth_fraction == pytest.approx(0.7, abs=0.03)
    assert report.after.protocol_us["graph"] == pytest.approx(2.5, abs=0.5)
    held = report.errors["held_out"]
    assert held["after_mape_pct"] < 3 < held["before_mape_pct"]
    other = _measured(tmp_path, "h100-sxm", true)
    cross = cal.cross_device(other, load_hardware("h100-sxm"), report, test_rows=30)
    assert cross["after_mape_pct"] < 3 < cross["before_mape_pct"]

    path = write_calibration(tmp_path / "c.yaml", report.after, DEFAULT_PARAMS, {"hw": "h200-sxm"},
                             report.errors)
    back = read_calibration(path)
    assert back.bandwidth_fraction == pytest.approx(report.after.bandwidth_fraction, abs=1e-4)
    assert back.protocol_us["graph"] == pytest.approx(report.after.protocol_us["graph"], abs=1e-3)


def test_split_is_deterministic_and_disjoint() -> None:
    fit, held = cal.split(np.arange(100), 10, 20)
    assert len(fit) == 10 and 15 <= len(held) <= 20 and not set(fit) & set(held)
    assert (cal.split(np.arange(100), 10, 20)[0] == fit).all()


@pytest.mark.parametrize("name", ["b200-sxm", "h200-sxm", "l40s"])
def test_the_shipped_constants_applied_leave_a_devices_rates_as_they_are(name: str) -> None:
    """constants_of then apply_params (what `mpsim calibrate` and the leave-one-out table start
    from) prices a device as the shipped defaults do: on B200 the calibratable L2 port is the thread
    loads' and the chip's (H200's), not its TMA copies' wider one (which priced its MMHA rows 38%
    fast when the two were set together)."""
    from mpsim.analysis.validation.constants import apply_params
    from mpsim.sim.gpu.rates import gpu_rates

    hw = load_hardware(name)
    a, b = gpu_rates(hw, DEFAULT_PARAMS), gpu_rates(hw, apply_params(DEFAULT_PARAMS, constants_of(hw)))
    rates = ("port_Bpc", "thread_port_Bpc", "l2_Bpc")
    assert [getattr(a, k) for k in rates] == pytest.approx([getattr(b, k) for k in rates])
