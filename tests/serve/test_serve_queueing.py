"""Queueing sanity: Little's law, throughput = offered rate below saturation, a plateau above it with
latency growing with the run's length, bit-for-bit determinism per seed. Priced by the roofline on
MobileLLaMA-1.4B (saturation ~540 requests/s at prompt 256, 64 new tokens on h200-sxm)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from serve_cases import requests, serve

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.config import ServeConfig
from mpsim.serve.engine import make_pricer
from mpsim.serve.pricing import IterationPricer

MODEL = "mobilellama-1.4b"


def _pricer() -> IterationPricer:
    return make_pricer(get_model(MODEL), parse_policy("fp16"), load_hardware("h200-sxm"),
                       ServeConfig(perf_model="roofline"))


def test_littles_law_on_a_long_run() -> None:
    """Mean requests in the system (time-averaged over the engine's iterations, from the scheduler's
    own counts) = throughput x mean E2E, within 2%."""
    s = serve(requests(MODEL, rate=300.0, n=3000)).summary
    assert s["mean_in_system"] == pytest.approx(s["throughput_rps"] * s["e2e_mean_s"], rel=0.02)


@pytest.mark.parametrize("rate", [50.0, 300.0])
def test_below_saturation_throughput_is_the_offered_rate(rate: float) -> None:
    n = 1500
    s = serve(requests(MODEL, rate=rate, n=n, seed=3)).summary
    # the run's span is n - 1 exponential gaps (sd ~ 1/sqrt(n) relative) plus the last request's E2E
    assert s["throughput_rps"] == pytest.approx(rate, rel=3 / math.sqrt(n) + s["e2e_p99_s"] * rate / n)


def test_above_saturation_throughput_plateaus_and_latency_grows() -> None:
    pricer = _pricer()
    runs = {(rate, n): serve(requests(MODEL, rate=rate, n=n), pricer=pricer).summary
            for rate, n in ((2000.0, 600), (4000.0, 600), (2000.0, 1200))}
    plateau = runs[(2000.0, 600)]["throughput_rps"]
    assert plateau < 2000.0 * 0.5  # far below the offered rate
    assert runs[(4000.0, 600)]["throughput_rps"] == pytest.approx(plateau, rel=0.05)
    assert runs[(2000.0, 1200)]["throughput_rps"] == pytest.approx(plateau, rel=0.05)
    # the queue grows as long as requests keep coming: twice the run, about twice the wait
    assert runs[(2000.0, 1200)]["e2e_mean_s"] > 1.6 * runs[(2000.0, 600)]["e2e_mean_s"]
    assert runs[(2000.0, 1200)]["ttft_p99_s"] > 1.6 * runs[(2000.0, 600)]["ttft_p99_s"]


def test_same_seed_same_result_bit_for_bit() -> None:
    def run(seed: int, pricer: IterationPricer) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, object]]:
        r = serve(requests(MODEL, rate=400.0, n=60, prompt="lognormal:200:0.5", gen="uniform:8:48",
                           seed=seed), pricer=pricer)
        summary = {k: v for k, v in r.summary.items() if k not in ("wall_s", "pricing")}
        return r.requests, r.iterations, summary

    first = _pricer()
    a, b, c = run(7, first), run(7, _pricer()), run(8, first)  # b prices everything afresh
    pd.testing.assert_frame_equal(a[0], b[0], check_exact=True)
    pd.testing.assert_frame_equal(a[1], b[1], check_exact=True)
    assert a[2].keys() == b[2].keys()
    assert all(x == y or (x != x and y != y) for x, y in zip(a[2].values(), b[2].values(), strict=True))
    assert not a[0]["e2e_s"].equals(c[0]["e2e_s"])
