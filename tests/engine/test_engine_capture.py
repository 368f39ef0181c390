"""Capture holds to synthesis launch for launch; Kineto import reads the annotated profile back."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from engine_cases import SMALL, TIE_GAP, first_divergence, variant

from mpsim.engine.capture import capture
from mpsim.models import ModelSpec
from mpsim.policy import parse_policy
from mpsim.synth import synthesize
from mpsim.traces.io import read_trace, write_trace
from mpsim.traces.kineto import import_kineto
from mpsim.workload import Workload

COMPARED = ["kernel", "op", "phase", "step", "layer", "module", "m", "n", "k", "w_format", "w_bits",
            "group_size", "bias", "batch", "q_len", "kv_len", "num_q_heads", "num_kv_heads", "head_dim",
            "k_bits", "v_bits", "causal", "kv_block", "kv_tokens", "grid", "config", "flops",
            "bytes_read", "bytes_written"]


@pytest.mark.parametrize(("spec", "policy", "profile_name"), [
    (SMALL, "ap4-4@1-3+kv8", "kineto.json"),
    (variant(norm="layer", mlp="gelu", parallel_attn_mlp=True, qkv_bias=True, o_bias=True,
             mlp_bias=True, lm_head_bias=True, rotary_fraction=0.5), "w4g64+kv4", "kineto.json.gz"),
    # issue 26: mpsim's fp8 W8A8 GEMMs (activation quantization first), fp8 e4m3 KV, FP4 weight-only
    (SMALL, "fp8+kv8f", "kineto.json"),
    (SMALL, "nvfp4", "kineto.json"),
])
def test_capture_matches_synth_launch_for_launch(spec: ModelSpec, policy: str, profile_name: str,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPSIM_AUTOTUNE", "0")  # on a GPU: the heuristic configs synthesis records
    wl = Workload(prompt_len=5, gen_len=3, batch=2)
    profile = tmp_path / profile_name
    captured = capture(spec, parse_policy(policy), wl, profile=profile)
    assert (profile.read_bytes()[:2] == b"\x1f\x8b") == profile_name.endswith(".gz")  # gzip as named
    path = write_trace(captured, tmp_path / "cap.parquet")
    cap = read_trace(path)
    syn = synthesize(spec, parse_policy(policy), wl, on_gpu=torch.cuda.is_available()).rows
    assert len(cap.rows) == len(syn)
    pd.testing.assert_frame_equal(cap.rows[COMPARED], syn[COMPARED], check_dtype=False)
    assert cap.rows["measured_us"].notna().all() and (cap.rows["measured_us"] > 0).all()
    assert cap.meta.source == "capture" and cap.meta.environment["timer"]
    assert "interpreter" in str(cap.rows["device"].iloc[0]) or torch.cuda.is_available()

    imported = import_kineto(profile)
    pd.testing.assert_frame_equal(imported.rows[COMPARED], cap.rows[COMPARED], check_dtype=False)
    assert imported.meta.environment["dropped_kernels"] >= 0


# The collective rows' own columns (schema 5), compared besides COMPARED under --tp.
PARALLEL = ["tp", "stage", "msg_bytes", "comm_library"]


def _tp_case(name: str) -> tuple[ModelSpec, str | Path | None, str]:
    """(spec, weights folder or None for random weights, policy) of a tensor-parallel case."""
    if name == "tiny":  # the shipped weights: GQA 4/2 split, int4 groups of 128 on K shards of 128
        from mpsim.tiny.shipped import resolve_model

        spec, weights = resolve_model("tiny", None)
        return spec, weights, "w4+kv8"
    # random weights, one KV head replicated on both ranks, any-precision planes split along K
    return variant(num_kv_heads=1, mlp_bias=True), None, "ap4-4@1-3+kv4"


@pytest.mark.parametrize("case", ["tiny", pytest.param("replicated-kv", marks=pytest.mark.slow)])
def test_capture_tp2_matches_synth_and_tp1_text(case: str, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """Two processes (gloo over loopback) capture rank 0's launches: row for row `synth --tp 2`;
    the text is TP 1's, except where a near-tie of TP 1's top two logits flips (summation order)."""
    from mpsim.engine.backends import TritonBackend
    from mpsim.engine.capture import capture_prompts
    from mpsim.engine.capture_tp import capture_tp
    from mpsim.engine.generate import generate
    from mpsim.engine.model import Decoder
    from mpsim.engine.scheduler import FixedScheduler
    from mpsim.engine.weights import dummy_weights, load_hf_weights

    monkeypatch.setenv("MPSIM_AUTOTUNE", "0")
    spec, weights, text = _tp_case(case)
    policy, wl = parse_policy(text), Workload(prompt_len=5, gen_len=3, batch=2)
    trace, tokens = capture_tp(spec, policy, wl, 2, weights=weights, timeout_s=300)
    cap = read_trace(write_trace(trace, tmp_path / "tp2.parquet"))
    syn = synthesize(spec, policy, wl, on_gpu=torch.cuda.is_available(), tp=2).rows
    assert len(cap.rows) == len(syn)
    assert (cap.rows["op"] == "allreduce").sum() == wl.gen_len * (1 + 2 * spec.num_layers)
    pd.testing.assert_frame_equal(cap.rows[COMPARED + PARALLEL], syn[COMPARED + PARALLEL], check_dtype=False)
    assert (cap.rows["measured_us"] > 0).all() and cap.meta.environment["parallel"]["ranks"] == 2

    params = load_hf_weights(weights, spec) if weights is not None else dummy_weights(spec, 0)
    one = generate(Decoder(params, policy, TritonBackend(), dummy_seed=None if weights else 0),
                   capture_prompts(spec, wl, 0), wl.gen_len, FixedScheduler(policy), keep_logits=True)
    where = first_divergence(one.tokens, tokens)
    if where is not None:  # allowed only at a tie of TP 1's top two logits
        seq, step = where
        top2 = torch.topk(one.logits[step][seq].float(), 2).values
        gap = float(top2[0] - top2[1])
        assert gap < TIE_GAP, f"{case}: TP 2 diverges from TP 1 at seq {seq} step {step}, clear gap {gap}"
        pytest.xfail(f"{case}: tie at seq {seq} step {step} (top-2 gap {gap:.2e}) flipped the choice")


def test_kineto_without_mpsim_ranges_is_a_clear_error(tmp_path: Path) -> None:
    from mpsim.traces.errors import TraceError

    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}))
    with pytest.raises(TraceError, match="no 'mpsim/' ranges"):
        import_kineto(path)
