"""Serving with a parallel plan (issue 25 point 5): capacity over the devices, one clear error for a
plan that does not fit or that the model cannot take, iterations priced with the collectives."""

from __future__ import annotations

import re

import pytest
from serve_cases import requests

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.memory import device_weights_bytes, weights_bytes
from mpsim.models import get_model
from mpsim.parallel import ParallelPlan
from mpsim.policy import parse_policy
from mpsim.serve.config import SchedulerConfig, ServeConfig
from mpsim.serve.engine import run_serve
from mpsim.serve.kv import kv_capacity

L70 = get_model("llama-3-70b")
H100 = load_hardware("h100-sxm")


def test_capacity_counts_every_device() -> None:
    policy, cfg = parse_policy("w4+kv8"), SchedulerConfig()
    caps = {tp: kv_capacity(L70, policy, H100, cfg, 8192, ParallelPlan(tp)) for tp in (1, 2, 4)}
    assert [c.devices for c in caps.values()] == [1, 2, 4]
    assert caps[2].weights_bytes < weights_bytes(L70, policy) / 2 * 1.01  # one rank's share
    assert caps[2].kv_bytes_per_token * 2 == caps[1].kv_bytes_per_token  # 4 of the 8 KV heads
    # a device frees half its weights and holds half the KV per token: more than twice the tokens
    assert caps[2].tokens > 2 * caps[1].tokens and caps[4].tokens > 2 * caps[2].tokens
    assert device_weights_bytes(L70, policy) == weights_bytes(L70, policy)
    # pipeline stages: 80 layers over 2 stages, the most loaded one holds 40 layers and one vocab end
    assert device_weights_bytes(L70, policy, 1, 2) < weights_bytes(L70, policy) / 2 * 1.05


def test_a_plan_that_does_not_fit_is_one_clear_error() -> None:
    cfg = ServeConfig(tp=2)
    with pytest.raises(MpsimInputError, match=re.escape(
            "llama-3-70b fp16 does not fit on 2 x l40s (tp 2 x pp 1): the most loaded device needs")) as e:
        run_serve(L70, parse_policy("fp16"), load_hardware("l40s"), requests("llama-3-70b", n=2), cfg)
    assert "GB over the 2 devices, and has 43.20 GB" in str(e.value)
    with pytest.raises(MpsimInputError, match=r"--tp 3 does not divide the 64 query heads of llama-3-70b"):
        run_serve(L70, parse_policy("w4+kv8"), H100, requests("llama-3-70b", n=2), ServeConfig(tp=3))
    with pytest.raises(MpsimInputError, match=r"--tp 0: expected a whole number >= 1"):
        ServeConfig(tp=0)


@pytest.mark.parametrize(("engine", "tp", "pp"), [("mpsim", 2, 1), ("vllm", 2, 2)])
def test_parallel_iterations_are_priced_with_their_collectives(engine: str, tp: int, pp: int) -> None:
    """A small model on a tp x pp plan: the components (with the `comm` one) agree with the exact
    launch list of the audited iterations, and the collectives make a step slower than one GPU's."""
    reqs = requests(n=12, prompt=64, gen=8, rate=50.0)
    spec, policy, hw = get_model("mobilellama-1.4b"), parse_policy("w4"), load_hardware("h200-sxm")
    runs = {}
    for plan in ((1, 1), (tp, pp)):
        cfg = ServeConfig(perf_model="sim", engine=engine, tp=plan[0], pp=plan[1])
        runs[plan] = run_serve(spec, policy, hw, reqs, cfg, audit_every=5).summary
    got = runs[(tp, pp)]
    assert got["devices"] == tp * pp and got["tp"] == tp and got["pp"] == pp
    assert got["output_tokens_per_s_per_device"] == pytest.approx(got["output_tokens_per_s"] / (tp * pp))
    audit = got["pricing"]["audit"]
    assert audit is not None and audit["max_abs_rel"] < 1e-3  # components == the exact launch list
    assert got["kv_capacity"]["num_blocks"] > runs[(1, 1)]["kv_capacity"]["num_blocks"]
