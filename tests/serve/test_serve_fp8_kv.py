"""Serving issue 26's formats: an fp8 e4m3 cache holds 1 B a value (no per-token scales: 256/128 the
sequences of fp16 KV, a little more than int8's 256/132), its attention rows say so, and a cache an
engine does not run is one clear error (fp8 weights served: test_serve_engines.py)."""

from __future__ import annotations

import pytest
from serve_cases import requests

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.config import SchedulerConfig, ServeConfig
from mpsim.serve.engine import make_pricer, run_serve
from mpsim.serve.kv import kv_capacity
from mpsim.serve.rows import decode_attention_row

SPEC = get_model("vicuna-7b")
HW = load_hardware("h200-sxm")
CFG = SchedulerConfig(max_num_seqs=512)


def test_an_fp8_cache_holds_one_byte_a_value() -> None:
    fp16, int8, fp8 = (kv_capacity(SPEC, parse_policy(p), HW, CFG, 4096)
                       for p in ("fp16", "fp16+kv8", "fp16+kv8f"))
    assert fp8.kv_bytes_per_token == 32 * 32 * 2 * 128 and int8.kv_bytes_per_token == 32 * 32 * 2 * 132
    free = fp16.usable_bytes - fp16.weights_bytes - fp16.workspace_bytes
    assert fp8.num_blocks == free // (16 * fp8.kv_bytes_per_token)
    assert fp8.num_blocks / fp16.num_blocks == pytest.approx(2.0, rel=1e-3)
    assert fp8.num_blocks > int8.num_blocks


def test_serving_rows_carry_the_cache_format() -> None:
    write, attn = decode_attention_row(SPEC, 8, 300, 2000, 8, 16, 0, "fp8-e4m3")
    assert (write["kv_format"], attn["kv_format"], attn["k_bits"]) == ("fp8-e4m3", "fp8-e4m3", 8)
    write, attn = decode_attention_row(SPEC, 8, 300, 2000, 8, 16)
    assert (write["kv_format"], attn["kv_format"]) == ("int8", "int8")


def test_vllm_serves_an_fp8_cache_and_refuses_an_int8_one() -> None:
    cfg = ServeConfig(scheduler=SchedulerConfig(chunked_prefill=False), perf_model="roofline",
                      engine="vllm")
    res = run_serve(get_model("tiny"), parse_policy("fp16+kv8f"), HW,
                    requests("tiny", n=6, prompt=64, gen=8), cfg)
    assert res.requests["finish_s"].notna().all()
    assert res.capacity.kv_bytes_per_token == kv_capacity(
        get_model("tiny"), parse_policy("fp16+kv8f"), HW, cfg.scheduler, 4096).kv_bytes_per_token
    with pytest.raises(MpsimInputError, match="engine 'vllm' cannot run policy 'fp16\\+kv8'"):
        make_pricer(get_model("tiny"), parse_policy("fp16+kv8"), HW, cfg)
