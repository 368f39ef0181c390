"""Serving agrees with the kernel level: a lone request, and a closed batch, against `mpsim simulate`
of the equivalent synthesized trace (serve's KV block size). An iteration is one measured call of its
launches: on a GPU, serve's prefill iteration (protocol `eager`) costs the kernel bodies plus the
eager protocol's cost of one call, and a decode iteration (`graph`) the bodies plus the graph gap per
kernel, which is what `simulate` charges each launch by default (mpsim/sim/protocols.py)."""

from __future__ import annotations

import pytest
from serve_cases import requests, serve, together

from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.sim.protocols import get_protocol
from mpsim.synth import synthesize
from mpsim.workload import Workload


def _kernel_level(model: str, policy: str, hw: str, prompt: int, gen: int, batch: int) -> tuple[float, float]:
    """TTFT (the prefill pass's kernel bodies plus one eager call of its launches on a GPU) and TPOT
    (graph, the simulator's default) of the trace."""
    trace = synthesize(get_model(model), parse_policy(policy), Workload(prompt, gen, batch), kv_block=16)
    spec = load_hardware(hw)
    s = simulate(trace, spec, "sim", cache_dir=None).summary
    bodies = simulate(trace, spec, "sim", cache_dir=None, protocol="kernel").summary
    launches = int((trace.rows["phase"] == "prefill").sum())
    eager = get_protocol("eager").cost_s(launches) if isinstance(spec, GpuSpec) else 0.0
    return bodies.ttft_s + eager, s.tpot_mean_s


@pytest.mark.parametrize(("policy", "hw", "prompt"), [
    ("fp16", "h200-sxm", 512), ("ap4-4@64-3+kv8", "h200-sxm", 500), ("w4+kv4", "npu-llm", 300)])
def test_a_lone_request_is_the_synthesized_generation(policy: str, hw: str, prompt: int) -> None:
    """Rate -> 0: one request alone, default flags (chunked prefill, buckets on); within 1%."""
    ttft, tpot = _kernel_level("vicuna-7b", policy, hw, prompt, 128, 1)
    reqs = requests("vicuna-7b", rate=1e-3, n=1, prompt=prompt, gen=128)
    r = serve(reqs, "vicuna-7b", policy, hw, perf_model="sim").requests.iloc[0]
    assert r["ttft_s"] == pytest.approx(ttft, rel=0.01)
    assert r["tpot_s"] == pytest.approx(tpot, rel=0.01)
    if prompt == 512:  # tile-aligned shapes: every bucket is exact, so the match is too
        assert r["ttft_s"] == pytest.approx(ttft, rel=1e-9) and r["tpot_s"] == pytest.approx(tpot, rel=1e-9)


@pytest.mark.parametrize(("policy", "batch"), [("fp16", 4), ("w4+kv8", 8)])
def test_a_closed_batch_is_the_synthesized_batch(policy: str, batch: int) -> None:
    """B identical requests at once, chunking off, a budget of B x prompt: within 2%."""
    prompt, gen = 384, 64
    ttft, tpot = _kernel_level("vicuna-7b", policy, "h200-sxm", prompt, gen, batch)
    reqs = together(requests("vicuna-7b", n=batch, prompt=prompt, gen=gen))
    res = serve(reqs, "vicuna-7b", policy, "h200-sxm", perf_model="sim", chunked_prefill=False,
                max_num_batched_tokens=batch * prompt + gen)
    assert len(res.iterations) == gen  # one prefill iteration of the whole batch, then decodes
    assert (res.requests["ttft_s"] - ttft).abs().max() <= 0.02 * ttft
    assert (res.requests["tpot_s"] - tpot).abs().max() <= 0.02 * tpot
