"""Leave-one-GPU-out machinery (analysis/validation/loo.py, loo_fit.py, lsq.py, loo_md.py): the
robust least squares finds a known minimum inside its bounds, a device-independent constant
perturbed on synthetic rows of two GPUs is found again by the joint fit, the folds are the ones the
issue names, the doc section is replaced in place, and a tiny sample of the published tables reads
(skipped with a reason without ../shared)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from groundtruth_cases import GROUNDTRUTH, needs_groundtruth

from mpsim.analysis.validation.calibration import Evaluator
from mpsim.analysis.validation.constants import constants_of
from mpsim.analysis.validation.loo import class_rows, folds, table
from mpsim.analysis.validation.loo_fit import Pool, fit_shared
from mpsim.analysis.validation.loo_md import BEGIN, END, HEADING, write_doc
from mpsim.analysis.validation.lsq import robust_lsq
from mpsim.analysis.validation.measured import read_generic_csv
from mpsim.analysis.validation.predict import predict_rows
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.params import DEFAULT_PARAMS, with_params

SHAPES = ((1, 4096, 4096), (8, 8192, 4096), (64, 4096, 4096), (256, 4096, 8192), (1024, 4096, 4096),
          (2048, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 4096))
TRUE_ETA = DEFAULT_PARAMS.eta_mma * 0.8


def test_robust_lsq_finds_a_known_minimum_and_respects_bounds() -> None:
    t = np.linspace(0, 1, 30)
    y = 2.0 * np.exp(-1.5 * t) + 0.3
    def fun(x: np.ndarray) -> np.ndarray:
        return x[0] * np.exp(-x[1] * t) + x[2] - y
    r = robust_lsq(fun, np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.0]), np.array([5.0, 5.0, 5.0]),
                   np.full(3, 1e-6), max_iters=60, tol=0.0)
    assert r.x == pytest.approx([2.0, 1.5, 0.3], abs=1e-3)
    assert r.cost < 1e-8 < r.cost_start
    capped = robust_lsq(fun, np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.0, 0.0]),
                        np.array([1.5, 5.0, 5.0]), np.full(3, 1e-6), max_iters=60, tol=0.0)
    assert capped.x[0] == 1.5  # the box holds: the best amplitude is outside it


def _pool(tmp_path: Path, hw_name: str) -> Pool:
    """bf16 GEMM rows on `hw_name`, "measured" with eta_mma 20% below the shipped value (and the
    GEMM configs chosen at the shipped constants, which the fit holds)."""
    path = tmp_path / f"{hw_name}.csv"
    lines = ["op,m,n,k,w_format,w_bits,measured_us,protocol"]
    lines += [f"gemm,{m},{n},{k},bf16,16,1.0,kernel" for m, n, k in SHAPES]
    path.write_text("\n".join(lines) + "\n")
    rows = read_generic_csv(path).rows
    hw = load_hardware(hw_name)
    shipped = Evaluator(rows, hw)
    shipped.predict(constants_of(hw))  # GEMM configs chosen at the shipped constants, then held
    truth = predict_rows(rows, hw, cache_dir=None, configs=dict(shipped.configs),
                         params=with_params(DEFAULT_PARAMS, {"eta_mma": TRUE_ETA}))
    rows = rows.assign(measured_us=truth.predicted_us)
    assert np.isfinite(rows["measured_us"]).all()
    ev = Evaluator(rows, hw)
    ev.configs = dict(shipped.configs)  # as the fit holds them (calibration.py)
    return Pool(hw_name, ev)


def test_a_perturbed_constant_is_found_again_on_two_gpus(tmp_path: Path) -> None:
    pools = [_pool(tmp_path, "h200-sxm"), _pool(tmp_path, "l40s")]
    fit = fit_shared(pools, ("eta_mma", "npu_epilogue_ops"), max_iters=10)
    assert fit.params["eta_mma"] == pytest.approx(TRUE_ETA, rel=0.01)
    assert fit.screened_out == ("npu_epilogue_ops",)  # an NPU constant: no GPU row responds
    assert fit.cost_after < 0.1 * fit.cost_before
    for p in pools:
        err = np.abs(p.predict(fit.params, fit.protocol_us) - p.ev.measured) / p.ev.measured
        assert err.max() < 0.01


def test_no_rows_is_refused() -> None:
    with pytest.raises(MpsimInputError, match="no GPU rows"):
        fit_shared([], ("eta_mma",))


def test_folds_leave_each_gpu_and_the_hopper_pair_out() -> None:
    f = folds(["h200_sxm", "h100_sxm", "l40s", "b200_sxm"])
    assert f["in-sample"] == ["h200_sxm", "h100_sxm", "l40s", "b200_sxm"]
    assert f["-l40s"] == ["h200_sxm", "h100_sxm", "b200_sxm"]
    assert f["-Hopper"] == ["l40s", "b200_sxm"]
    assert set(f) == {"in-sample", "-h200_sxm", "-h100_sxm", "-l40s", "-b200_sxm", "-Hopper"}


def test_the_doc_section_is_added_once_then_replaced(tmp_path: Path) -> None:
    doc = tmp_path / "v.md"
    doc.write_text("# Validation\n\nother text\n")
    rows = pd.DataFrame({"cls": "gemm bf16", "gpu": "l40s", "band": ["1-16", "17-256"],
                         "measured": [10.0, 20.0], **{m: [11.0, 18.0] for m in (
                             "shipped", "in-sample", "leave-one-GPU-out", "leave-one-arch-out",
                             "roofline", "eff. roofline (other GPUs)")}})
    t = table(rows)
    assert list(t["M band"]) == ["1-16", "17-256", "all"]
    assert t["leave-one-GPU-out"].tolist() == pytest.approx([10.0, 10.0, 10.0])
    write_doc(doc, t, {}, 100, 60.0)
    write_doc(doc, t, {}, 50, 60.0)
    text = doc.read_text()
    assert text.count(HEADING) == 1 and text.count(BEGIN) == 1 and text.count(END) == 1
    assert "at most 50 fitted rows" in text and "other text" in text


@needs_groundtruth
def test_a_small_sample_of_the_published_tables_reads() -> None:
    rows = class_rows(GROUNDTRUTH, "gemm", "l40s", 6)
    assert 0 < len(rows) <= 6
    assert (rows["status"] == "ok").all() and set(rows["cls"]) == {"gemm bf16"}
    with pytest.raises(MpsimInputError, match="held-out"):
        class_rows(GROUNDTRUTH, "gemm", "a100_sxm", 6)
