"""Capacity: quantized KV holds about 2x (+kv8) and 4x (+kv4) the sequences of fp16 KV, by the block
arithmetic; w4 frees its weights' memory; running past the capacity preempts, and it is counted."""

from __future__ import annotations

import pytest
from serve_cases import requests, serve, together

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.config import SchedulerConfig
from mpsim.serve.kv import kv_capacity
from mpsim.traces.accounting import kv_bytes_per_token_head

SPEC = get_model("vicuna-7b")
HW = load_hardware("h200-sxm")
CFG = SchedulerConfig(max_num_seqs=512)


def _cap(policy: str):  # type: ignore[no-untyped-def]
    return kv_capacity(SPEC, parse_policy(policy), HW, CFG, 4096)


def test_block_arithmetic() -> None:
    fp16, kv8, kv4, w4 = _cap("fp16"), _cap("fp16+kv8"), _cap("fp16+kv4"), _cap("w4")
    per_head = {b: kv_bytes_per_token_head(128, b) for b in (16, 8, 4)}
    assert per_head == {16: 256, 8: 132, 4: 68}  # int codes + an fp16 scale and zero per token per head
    free = fp16.usable_bytes - fp16.weights_bytes - fp16.workspace_bytes
    for cap, bits in ((fp16, 16), (kv8, 8), (kv4, 4)):
        assert cap.kv_bytes_per_token == 32 * 32 * 2 * per_head[bits]
        assert cap.num_blocks == free // (16 * cap.kv_bytes_per_token)
    assert kv8.num_blocks / fp16.num_blocks == pytest.approx(256 / 132, rel=1e-3)  # ~1.94x
    assert kv4.num_blocks / fp16.num_blocks == pytest.approx(256 / 68, rel=1e-3)   # ~3.76x
    freed = fp16.weights_bytes - w4.weights_bytes  # w4 stores ~4.1 bits per weight
    assert w4.num_blocks - fp16.num_blocks == pytest.approx(freed / (16 * fp16.kv_bytes_per_token), abs=1)


def test_concurrency_follows_the_blocks_and_overflow_preempts() -> None:
    """vicuna-7b, 3072-token prompts, on h200-sxm: more requests at once than the cache holds,
    admitted quickly (prefill-first, 16 prompts per iteration) so that memory, not turnover, binds."""
    peak = {}
    for policy, n in (("fp16", 90), ("fp16+kv8", 160), ("fp16+kv4", 300)):
        res = serve(together(requests("vicuna-7b", n=n, prompt=3072, gen=128)), "vicuna-7b", policy,
                    max_num_seqs=512, chunked_prefill=False, max_num_batched_tokens=16 * 3072)
        s, cap = res.summary, res.capacity
        peak[policy] = s["peak_concurrent_sequences"]
        # admission stops when the next prompt's 192 blocks would eat into the 1% watermark
        assert peak[policy] <= (cap.num_blocks - cap.watermark_blocks) // (3072 // 16)
        assert peak[policy] >= 0.95 * (cap.num_blocks - cap.watermark_blocks) // (3072 // 16 + 2)
        assert s["preemptions"] > 0 and s["preemptions"] == res.requests["preemptions"].sum()
        assert res.requests["finish_s"].notna().all()
        assert (res.iterations["kv_blocks_used"] <= cap.num_blocks).all()
    assert peak["fp16+kv8"] / peak["fp16"] == pytest.approx(256 / 132, rel=0.03)
    assert peak["fp16+kv4"] / peak["fp16"] == pytest.approx(256 / 68, rel=0.03)


def test_no_preemption_within_capacity() -> None:
    res = serve(together(requests("vicuna-7b", n=20, prompt=3072, gen=32)), "vicuna-7b", "fp16")
    assert res.summary["preemptions"] == 0 and res.summary["peak_concurrent_sequences"] == 20
