"""Pricing: the buckets' segments, and the error they and the components add, measured."""

from __future__ import annotations

import numpy as np
import pytest
from serve_cases import requests, serve, together

from mpsim.engines import Target, get_engine
from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.config import Buckets, IterationProtocols, ServeConfig
from mpsim.serve.engine import run_serve
from mpsim.serve.pricing import decode_buckets
from mpsim.sim.protocols import get_protocol


def test_segments_hold_one_tile_count_and_stay_above_the_gemv_rows() -> None:
    b = Buckets()
    assert b.segment(7) == (7, 7) and b.segment(16) == (16, 16)
    # a GEMM's first segments end where cuBLAS's (and TRT-LLM's fp8) token tile switches: 32, 64
    assert b.segment(20, 64) == (17, 32) and b.segment(32, 64) == (17, 32)
    assert b.segment(49, 64) == (33, 64) and b.segment(65, 64) == (65, 128)
    assert b.segment(300) == (289, 304) and b.segment(3000) == (2945, 3072)
    for x in (17, 63, 64, 100, 257, 1000, 4095):
        lo, hi = b.segment(x, 64)
        assert lo <= x <= hi and (hi - lo + 1) / x <= 1 / 16 + 64 / x
    assert Buckets(enabled=False).segment(3000) == (3000, 3000)
    assert b.kv(65) == 128 and b.tokens(300) == 304


@pytest.mark.parametrize(("policy", "perf_model", "tolerance"), [
    ("w4+kv8", "sim", 0.005), ("w4+kv8", "roofline", 0.005), ("ap4-4@8-3+kv8", "roofline", 0.005),
    # two precision groups: the exact launch list runs the groups' GEMMs back to back and the
    # simulator credits only the last one's output as L2-resident; components credit each as in a
    # pass of its own (docs/serving.md: about -1.2% on these iterations)
    ("ap4-4@8-3+kv8", "sim", 0.02)])
def test_priced_iterations_match_their_exact_launch_lists(policy: str, perf_model: str,
                                                          tolerance: float) -> None:
    """Mixed iterations (chunks and decodes of many lengths): the bucketed, interpolated component
    price of every k-th iteration against one `simulate` call over its exact launch list."""
    res = serve(requests(rate=150.0, n=40, prompt="uniform:40:500", gen="uniform:2:40"),
                policy=policy, perf_model=perf_model, max_num_batched_tokens=768,
                audit_every=3 if perf_model == "sim" else 16)  # ~15-25 iterations each
    audit = res.summary["pricing"]["audit"]
    assert audit["iterations"] >= 15
    assert audit["mean_abs_rel"] < tolerance and abs(audit["total_rel"]) < tolerance


def test_whole_iteration_pricing_agrees_with_the_components() -> None:
    """`pricing: iterations` (what an NPU step model needs: one launch list per rounded iteration)
    against the components on the same run: a few percent apart (it rounds up where they
    interpolate); a lone request with round shapes on the simulator (which rounds KV to the same
    tiles itself) is the same."""
    reqs = requests(rate=150.0, n=40, prompt="uniform:40:500", gen="uniform:2:40")
    parts = serve(reqs, policy="w4+kv8", max_num_batched_tokens=768).summary
    whole = serve(reqs, policy="w4+kv8", max_num_batched_tokens=768, pricing="iterations").summary
    assert whole["pricing"]["signature_hits"] > 0
    for key in ("throughput_rps", "tpot_p50_s", "tpot_p99_s", "e2e_mean_s"):
        assert whole[key] == pytest.approx(parts[key], rel=0.05)
    lone = requests(rate=1e-3, n=1, prompt=512, gen=16)
    a = serve(lone, policy="w4+kv8", perf_model="sim").requests.iloc[0]
    b = serve(lone, policy="w4+kv8", perf_model="sim", pricing="iterations").requests.iloc[0]
    assert a["ttft_s"] == pytest.approx(b["ttft_s"], rel=1e-9)
    assert a["tpot_s"] == pytest.approx(b["tpot_s"], rel=1e-9)


@pytest.mark.parametrize(("decode", "prefill"), [("kernel", "graph"), ("graph", "eager"),
                                                 ("trt-profiler", "kernel")])
def test_the_iteration_log_records_the_protocols_it_priced(decode: str, prefill: str) -> None:
    """`--decode-protocol kernel --prefill-protocol graph` once priced under those protocols but
    labelled the iterations graph/eager; each iteration's time is its kernel bodies plus its
    protocol's cost for one call of its launches (mpsim/sim/protocols.py)."""
    reqs = together(requests(n=6, prompt=64, gen=4))  # the same iterations whatever they cost
    cfgs = {}
    for d, p in ((decode, prefill), ("kernel", "kernel")):
        cfg = ServeConfig(perf_model="sim", protocol=IterationProtocols(d, p))
        cfgs[(d, p)] = run_serve(get_model("mobilellama-1.4b"), parse_policy("fp16"),
                                 load_hardware("h200-sxm"), reqs, cfg).iterations
    it, bodies = cfgs[(decode, prefill)], cfgs[("kernel", "kernel")]
    has_prefill = it["prefill_seqs"] > 0
    assert has_prefill.any() and (~has_prefill).any()
    assert list(it["protocol"]) == [prefill if p else decode for p in has_prefill]
    cost = [get_protocol(prefill if p else decode).cost_s(n)
            for p, n in zip(has_prefill, it["launches"], strict=True)]
    np.testing.assert_allclose(it["time_s"], bodies["time_s"] + cost, rtol=1e-12, atol=0)


def test_kv_tiles_end_where_the_engines_decode_kernel_steps() -> None:
    """TensorRT-LLM's XQA / MMHA tiles count the cached tokens and the new one, so they step when
    kv_len reaches a multiple of a tile: its KV tiles are [k x 64, (k + 1) x 64 - 1]."""
    b = Buckets()
    assert decode_buckets(b, None, 16, None) == b
    tr = decode_buckets(b, engine_target("trtllm", "hopper"), 16, None)
    assert tr.kv_phase == 1 and decode_buckets(b, engine_target("vllm", "hopper"), 16, None) == b
    assert (tr.kv(448), tr.kv(511), tr.kv(512), tr.kv_segment(500)) == (511, 511, 575, (448, 511))
    assert (b.kv(448), b.kv(449), b.kv_segment(500)) == (448, 512, (449, 512))


def engine_target(name: str, arch: str) -> Target:
    return Target(get_engine(name), arch, (32, 32, 128, 128))
