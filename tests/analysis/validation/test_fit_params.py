"""`mpsim calibrate --against FILE --fit-params NAMES` (what scripts/model_fidelity.py --fit did,
untested): a perturbed simulator constant is found again, written to the calibration file and
applied by `validate --calibration`; bad names are refused before any work."""

from __future__ import annotations

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
from mpsim.sim.params import DEFAULT_PARAMS, with_params

NAME = "vllm.row_iter_rms_ns"  # a library room's constant, by its dotted name
TRUE = DEFAULT_PARAMS.vllm.row_iter_rms_ns * 1.3
TOKENS = (16, 64, 256, 512, 1024, 2048, 4096, 8192)


def _table(tmp_path: Path) -> Path:
    """RMSNorm rows (CUPTI-timed) measured with row_iter_rms_ns 30% above the shipped value."""
    path = tmp_path / "rms.csv"
    path.write_text("\n".join(["op,tokens,hidden,measured_us,protocol",
                               *(f"rmsnorm,{t},4096,1.0,kernel" for t in TOKENS)]) + "\n")
    rows = read_generic_csv(path).rows
    params = with_params(DEFAULT_PARAMS, {NAME: TRUE})
    measured = predict_rows(rows, load_hardware("h200-sxm"), cache_dir=None, params=params).predicted_us
    pd.DataFrame({"op": "rmsnorm", "tokens": TOKENS, "hidden": 4096, "measured_us": measured,
                  "protocol": "kernel"}).to_csv(path, index=False)
    return path


def test_a_perturbed_constant_is_found_again(tmp_path: Path) -> None:
    rows = read_generic_csv(_table(tmp_path)).rows
    ev = Evaluator(rows, load_hardware("h200-sxm"))
    start = constants_of(ev.hw)
    mask = np.ones(len(rows), dtype=bool)
    fitted = fit_params(ev, start, mask, (NAME,), iters=30)
    assert fitted.params[NAME] == pytest.approx(TRUE, rel=0.02)
    assert ev.loss(fitted, mask) < 0.01 < ev.loss(start, mask)


def test_the_command_writes_and_validate_applies_them(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    table, out = _table(tmp_path), tmp_path / "cal.yaml"
    assert main(["calibrate", "--against", str(table), "--hw", "h200-sxm", "--out", str(out),
                 "--fit-params", NAME, "--fit-iters", "30", "--test-rows", "0"]) == 0
    assert NAME in capsys.readouterr().out
    assert read_calibration(out).params[NAME] == pytest.approx(TRUE, rel=0.05)
    # a file written before the library rooms stores the flat name: it still reads, as the dotted one
    old = tmp_path / "old.yaml"
    old.write_text(out.read_text().replace(NAME, "row_iter_rms_ns"))
    assert read_calibration(old).params == read_calibration(out).params
    assert main(["validate", "--against", str(table), "--hw", "h200-sxm", "--calibration", str(out),
                 "--no-cache", "--summary", str(tmp_path / "s.csv")]) == 0
    s = pd.read_csv(tmp_path / "s.csv")
    assert s[s["model"] == "simulator"]["mape_pct"].max() < 2


@pytest.mark.parametrize("names", ["bogus", "bw_frac", f"{NAME},{NAME}", ",", "max_waves",
                                   "row_iter_rms_ns", "vllm.bogus", "cublas.token_granule"])
def test_bad_names_are_refused(names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MpsimInputError, match=r"--fit-params.*vllm\.row_iter_rms_ns, vllm\.row_ctas_eff"):
        parse_fit_params(names)
    assert main(["calibrate", "--against", str(tmp_path / "absent.csv"), "--hw", "h200-sxm",
                 "--out", str(tmp_path / "c.yaml"), "--fit-params", names]) == 2
    assert "--fit-params" in capsys.readouterr().err
