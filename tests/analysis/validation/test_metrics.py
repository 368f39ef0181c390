"""Error statistics, the per-class summary, and the 3-constant efficiency-roofline fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mpsim.analysis.validation.metrics import (
    eff_roofline,
    error_stats,
    fit_eff_roofline,
    format_summary,
    summary_table,
)


def test_error_stats_by_hand() -> None:
    s = error_stats(np.array([11.0, 9.0, 20.0, 5.0]), np.array([10.0, 10.0, 10.0, 10.0]))
    assert s["count"] == 4
    assert s["mape_pct"] == pytest.approx(100 * (0.1 + 0.1 + 1.0 + 0.5) / 4)
    assert s["bias_pct"] == pytest.approx(100 * (0.1 - 0.1 + 1.0 - 0.5) / 4)
    assert s["max_pct"] == pytest.approx(100.0)
    assert s["p90_pct"] == pytest.approx(100 * np.quantile([0.1, 0.1, 1.0, 0.5], 0.9))
    assert np.isnan(s["pearson_r"])  # constant measurements: r is undefined
    assert error_stats(np.array([np.nan]), np.array([1.0]))["count"] == 0


def test_summary_has_bands_per_class_and_a_total() -> None:
    frame = pd.DataFrame({"cls": ["a", "a", "a", "b"], "band": ["1-16", "17-256", "17-256", "n/a"],
                          "measured_us": [1.0, 2.0, 4.0, 8.0], "p": [1.1, 2.0, 4.4, 4.0]})
    t = summary_table(frame, {"sim": "p"})
    assert list(zip(t["cls"], t["band"], strict=True)) == [
        ("a", "1-16"), ("a", "17-256"), ("a", "all"), ("b", "all"), ("all classes", "all")]
    assert t.loc[(t["cls"] == "b"), "bias_pct"].iloc[0] == pytest.approx(-50.0)
    assert "all classes" in format_summary(t)


def test_eff_roofline_fit_recovers_its_constants() -> None:
    rng = np.random.default_rng(3)
    tm, tb = rng.uniform(1, 500, 300), rng.uniform(1, 500, 300)
    y = eff_roofline(tm, tb, 0.8, 0.9, 4.0)
    e_c, e_m, c = fit_eff_roofline(tm, tb, y)
    assert (e_c, e_m, c) == pytest.approx((0.8, 0.9, 4.0), rel=0.02)
