"""The scheduler and the precision groups: budgets, FCFS, chunks, preemption, per-request switches."""

from __future__ import annotations

import numpy as np
import pytest
from serve_cases import requests, serve, together

from mpsim.errors import MpsimInputError
from mpsim.policy import parse_policy
from mpsim.serve.arrivals import NO_SWITCH
from mpsim.serve.precision import PrecisionPlan


def test_chunked_iterations_keep_the_token_and_sequence_budgets() -> None:
    res = serve(requests(rate=2000.0, n=300, prompt="uniform:50:900", gen="uniform:1:40"),
                max_num_batched_tokens=1024, max_num_seqs=64)
    it = res.iterations
    assert (it["tokens"] <= 1024).all() and (it["batch"] <= 64).all() and (it["running"] <= 64).all()
    assert (it["prefill_tokens"] > 0).sum() > 0 and ((it["decode_seqs"] > 0) & (it["prefill_seqs"] > 0)).any()
    r = res.requests
    assert (r["first_token_s"] >= r["arrival_s"]).all() and (r["finish_s"] >= r["first_token_s"]).all()
    assert r.loc[r["gen_len"] == 1, "tpot_s"].isna().all()
    assert int(it["decode_seqs"].sum() + (it["prefill_seqs"] > 0).sum()) >= int(r["gen_len"].sum()) - len(r)


def test_first_come_first_served() -> None:
    """Identical requests arriving in order get their first tokens in that order."""
    r = serve(requests(rate=3000.0, n=200, prompt=300, gen=20), max_num_batched_tokens=512).requests
    assert r["first_token_s"].is_monotonic_increasing


def test_prefill_first_runs_prefill_only_iterations() -> None:
    res = serve(requests(rate=500.0, n=100, prompt=200, gen=30), chunked_prefill=False,
                max_num_batched_tokens=2048)
    it = res.iterations
    assert not ((it["decode_seqs"] > 0) & (it["prefill_seqs"] > 0)).any()
    assert (it.loc[it["prefill_seqs"] > 0, "prefill_tokens"] % 200 == 0).all()  # whole prompts


def test_prefill_first_refuses_what_one_iteration_cannot_prefill() -> None:
    with pytest.raises(MpsimInputError, match="without --chunked-prefill"):
        serve(requests(n=2, prompt=600, gen=10), chunked_prefill=False, max_num_batched_tokens=512)


def test_preemption_takes_the_youngest_and_recomputes() -> None:
    """A cache of 40 blocks (640 tokens) for requests of 200 + 200 tokens: the later admitted ones are
    preempted, recomputed, and everyone still gets every token."""
    res = serve(together(requests(n=6, prompt=200, gen=200)), num_kv_blocks=40, watermark=0.0)
    r = res.requests
    assert res.summary["preemptions"] > 0
    assert r.loc[0, "preemptions"] == 0  # the oldest is never the victim while others run
    assert (r["finish_s"].notna()).all() and (res.iterations["kv_blocks_used"] <= 40).all()


def test_a_request_larger_than_the_cache_is_refused() -> None:
    with pytest.raises(MpsimInputError, match="needs 25 KV blocks alone; the cache holds 20 blocks of 16"):
        serve(requests(n=1, prompt=300, gen=100), num_kv_blocks=20)


def test_precision_groups_follow_each_requests_switch_point() -> None:
    pol = parse_policy("ap4-4@10-3+kv8")
    plan = PrecisionPlan(pol, np.array([NO_SWITCH, 2, 0]))
    groups = plan.decode_group_of(np.array([0, 1, 2, 0, 1]), np.array([10, 3, 1, 11, 2]))
    four, three = (plan.choices.index(pol.weights_at("decode", s)) for s in (1, 11))
    assert list(groups) == [four, three, three, three, four]
    assert plan.token_groups(groups, 50) == ((four, 52), (three, 3))  # prefill tokens are 4-bit
    highest = PrecisionPlan(pol, np.array([NO_SWITCH] * 3), "highest")
    assert highest.token_groups(groups, 50) == ((four, 55),)
    with pytest.raises(MpsimInputError, match="per-request switch_step needs a progressive policy"):
        PrecisionPlan(parse_policy("w4"), np.array([3]))


def test_per_request_switches_change_the_run() -> None:
    base = requests("mobilellama-1.4b", rate=200.0, n=60, prompt=128, gen=64)
    early = requests("mobilellama-1.4b", rate=200.0, n=60, prompt=128, gen=64,
                     switch_steps=(np.array([0]), np.array([1.0])))
    slow = serve(base, policy="ap4-4@63-3").summary["tpot_mean_s"]  # never switches within 64 tokens
    fast = serve(early, policy="ap4-4@63-3").summary["tpot_mean_s"]  # 3-bit from the first step
    assert fast < slow
