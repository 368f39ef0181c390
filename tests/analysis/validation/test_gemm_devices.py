"""The per-GPU bf16 GEMM table (analysis/validation/gemm_devices.py): bands, errors, and the
efficiency roofline fitted on the other GPUs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.gemm_devices import bf16_only, table
from mpsim.analysis.validation.measured import Measurements
from mpsim.analysis.validation.metrics import eff_roofline


def _rows(gpu: str, meas_scale: float) -> pd.DataFrame:
    t_math = np.array([1.0, 2.0, 10.0, 50.0])
    t_mem = np.array([5.0, 4.0, 3.0, 2.0])
    meas = eff_roofline(t_math, t_mem, 0.8, 0.8, 2.0) * meas_scale
    return pd.DataFrame({"gpu": gpu, "band": ["1-16", "1-16", "257-8192", ">8192"],
                         "measured_us": meas, "predicted_us": meas * 1.1, "roofline_us": meas / 2,
                         "t_math_us": t_math, "t_mem_us": t_mem})


def test_table_errors_per_band_and_roofline_fitted_on_the_other_gpu() -> None:
    t = table(pd.concat([_rows("a", 1.0), _rows("b", 1.0), _rows("c", 2.0)], ignore_index=True))
    a = t[t["GPU"] == "a"].set_index("M band")
    assert list(a.index) == ["1-16", "257-8192", ">8192", "all"]
    assert a.loc["1-16", "rows"] == 2 and a.loc["all", "rows"] == 4
    assert a.loc["all", "sim MAPE"] == pytest.approx(10.0) and a.loc["all", "bias"] == pytest.approx(10.0)
    assert a.loc["all", "roofline MAPE"] == pytest.approx(50.0)
    # c's rows take twice as long: a roofline fitted on a and b misses them by about half
    c = t[t["GPU"] == "c"].set_index("M band")
    assert c.loc["all", "eff. roofline (other GPUs) MAPE"] > 30.0


def test_bf16_only_skips_other_dtypes() -> None:
    inp = pd.DataFrame({"gemm_dtype": ["bfloat16", "fp8", "bfloat16"]})
    rows = pd.DataFrame({"status": ["ok", "ok", "ok"]})
    out = bf16_only(Measurements("x", inp, rows))
    assert list(out.rows["status"]) == ["ok", "skipped: not bfloat16", "ok"]
