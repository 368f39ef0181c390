"""Capture holds to synthesis launch for launch; Kineto import reads the annotated profile back."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from engine_cases import SMALL, variant

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


def test_kineto_without_mpsim_ranges_is_a_clear_error(tmp_path: Path) -> None:
    from mpsim.traces.errors import TraceError

    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}))
    with pytest.raises(TraceError, match="no 'mpsim/' ranges"):
        import_kineto(path)
