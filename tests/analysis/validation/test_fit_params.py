"""`mpsim calibrate --against FILE --fit-params NAMES` (what scripts/model_fidelity.py --fit did,
untested): a perturbed simulator constant is found again, written to the calibration file and
applied by `validate --calibration`; bad names are refused before any work."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.calibration import Evaluator
from mpsim.analysis.validation.constants import constants_of, read_calibration
from mpsim.analysis.validation.fit_params import fit_params, parse_fit_params
from mpsim.analysis.validation.measured import read_generic_csv
from mpsim.analysis.validation.predict import predict_rows
from mpsim.cli import main
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.params import DEFAULT_PARAMS

TRUE = DEFAULT_PARAMS.row_iter_rms_ns * 1.3
TOKENS = (16, 64, 256, 512, 1024, 2048, 4096, 8192)


def _table(tmp_path: Path) -> Path:
    """RMSNorm rows (CUPTI-timed) measured with row_iter_rms_ns 30% above the shipped value."""
    path = tmp_path / "rms.csv"
    path.write_text("\n".join(["op,tokens,hidden,measured_us,protocol",
                               *(f"rmsnorm,{t},4096,1.0,kernel" for t in TOKENS)]) + "\n")
    rows = read_generic_csv(path).rows
    params = dataclasses.replace(DEFAULT_PARAMS, row_iter_rms_ns=TRUE)
    measured = predict_rows(rows, load_hardware("h200-sxm"), cache_dir=None, params=params).predicted_us
    pd.DataFrame({"op": "rmsnorm", "tokens": TOKENS, "hidden": 4096, "measured_us": measured,
                  "protocol": "kernel"}).to_csv(path, index=False)
    return path


def test_a_perturbed_constant_is_found_again(tmp_path: Path) -> None:
    rows = read_generic_csv(_table(tmp_path)).rows
    ev = Evaluator(rows, load_hardware("h200-sxm"))
    start = constants_of(ev.hw)
    mask = np.ones(len(rows), dtype=bool)
    fitted = fit_params(ev, start, mask, ("row_iter_rms_ns",), iters=30)
    assert fitted.params["row_iter_rms_ns"] == pytest.approx(TRUE, rel=0.02)
    assert ev.loss(fitted, mask) < 0.01 < ev.loss(start, mask)


def test_the_command_writes_and_validate_applies_them(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    table, out = _table(tmp_path), tmp_path / "cal.yaml"
    assert main(["calibrate", "--against", str(table), "--hw", "h200-sxm", "--out", str(out),
                 "--fit-params", "row_iter_rms_ns", "--fit-iters", "30", "--test-rows", "0"]) == 0
    assert "row_iter_rms_ns" in capsys.readouterr().out
    assert read_calibration(out).params["row_iter_rms_ns"] == pytest.approx(TRUE, rel=0.05)
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--calibration", str(out),
                 "--no-cache", "--summary", str(tmp_path / "s.csv")]) == 0
    s = pd.read_csv(tmp_path / "s.csv")
    assert s[s["model"] == "simulator"]["mape_pct"].max() < 2


@pytest.mark.parametrize("names", ["bogus", "bw_frac", "row_iter_rms_ns,row_iter_rms_ns", ",",
                                   "max_waves"])
def test_bad_names_are_refused(names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MpsimInputError, match="--fit-params"):
        parse_fit_params(names)
    assert main(["calibrate", "--against", str(tmp_path / "absent.csv"), "--hw", "h200-sxm",
                 "--out", str(tmp_path / "c.yaml"), "--fit-params", names]) == 2
    assert "--fit-params" in capsys.readouterr().err
