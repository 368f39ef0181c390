"""`mpsim serve --pp N` keeps N batches in flight, as vLLM's virtual engines (mpsim/serve/engine.py):
each request belongs to one of N schedulers (the one with the fewest unfinished requests), each with
1/N of the KV blocks; an iteration passes through the stages in turn and a stage serves the next
batch as soon as it is free."""

from __future__ import annotations

import numpy as np
import pytest
from serve_cases import requests, together

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.config import ServeConfig
from mpsim.serve.engine import run_serve

SPEC, H200 = get_model("mobilellama-1.4b"), load_hardware("h200-sxm")  # 24 layers: 12 a stage at pp 2


def _serve(reqs, pp: int):  # type: ignore[no-untyped-def]
    return run_serve(SPEC, parse_policy("w4"), H200, reqs, ServeConfig(perf_model="roofline", pp=pp))


def test_two_requests_at_once_run_as_two_batches_one_stage_apart() -> None:
    # two single-token requests arriving together: one to each virtual engine; engine 0's prefill
    # (price a) runs stage 0 over [0, a/2] and stage 1 over [a/2, a]; engine 1's waits for stage 0
    # until a/2, then [a/2, a] and [a, 3a/2]: first tokens at a and 3a/2
    out = _serve(together(requests(n=2, prompt=64, gen=1)), pp=2)
    a = out.iterations["time_s"].to_numpy()
    assert len(a) == 2 and a[0] == a[1]
    assert out.requests["first_token_s"].to_numpy() == pytest.approx([a[0], 1.5 * a[0]], rel=1e-12)
    assert out.capacity.num_blocks // 2 == int(out.iterations["kv_blocks_total"].iloc[0])


def test_batches_in_flight_overlap_the_stages() -> None:
    reqs = together(requests(n=24, prompt=64, gen=16))
    two = _serve(reqs, 2)
    assert two.summary["pp"] == 2 and not np.isnan(two.requests["finish_s"]).any()
    # each iteration's price is its stages' sum; run one after another they would take the sum of
    # the prices, with two stages busy at once no less than half of it
    prices = float(two.iterations["time_s"].sum())
    assert prices / 2 <= two.requests["finish_s"].max() < 0.9 * prices
    # routed to the engine with the fewest unfinished requests: 12 each, each engine's batch its own
    assert two.iterations["running"].max() == 12
