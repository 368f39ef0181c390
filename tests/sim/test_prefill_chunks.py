"""Prefill chunks after cached tokens (q_len < kv_len, chunked prefill) in every engine's prefill
attention room: the kv_len == q_len rows keep their work exactly (recorded before chunks were
priced), a chunk's work is the hand-counted tiles and bytes, its time sits above the FLOP and byte
bounds and between the chunk alone and the whole prompt, and more queries than keys is an error."""

from __future__ import annotations

from typing import Any

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.library import fa3
from mpsim.sim.gpu.library.fa3 import causal_tiles
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.sim.replay import simulate_launch
from mpsim.traces.accounting import causal_pairs

ROOMS = [("fa3", "h200-sxm"), ("sglang", "h200-sxm"), ("fa2", "l40s"),
         ("flashinfer_attention", "l40s"), ("flashinfer_trtllm", "b200-sxm"), ("trtllm", "h200-sxm")]


def _work(row: dict[str, Any], hw: str) -> list[tuple[Any, ...]]:
    """The part of each kernel's work that no clock or fitted constant sets: trips by CTA class,
    CTAs, DRAM reads, a trip's bytes and MMA FLOPs, a CTA's output bytes."""
    spec = load_hardware(hw)
    parts = launch_work(row, gpu_rates(spec, DEFAULT_PARAMS), DEFAULT_PARAMS, 0.0)
    return [(p.work.iters_by_class, p.work.total_ctas, p.work.dram_read_bytes, p.work.trip.load_bytes,
             p.work.trip.mma_flops, p.work.epilogue.write_bytes) for p in parts]


# (kernel, hw, batch, q_len, heads, kv_heads, head_dim, kv_bits, options) -> the attention part's
# work (`_work`), recorded from commit ecf531c (before chunks were priced); at that commit and after
# this change the same rows' simulated times, FLOPs and bytes were also compared, bit for bit
# (float.hex). Times are not pinned here: they move with the clock model and the fitted constants.
SAME = [
    (('fa3', 'h200-sxm', 1, 1024, 32, 8, 128, 16, {}),
     ((9,), 132, 12582912, 65536, 8388608.0, 63550.06060606061)),
    (('fa3', 'h200-sxm', 4, 333, 32, 32, 128, 16, {'kv_append': True}),
     ((6,), 132, 32735232, 65536, 8388608.0, 82664.72727272728)),
    (('fa3', 'h200-sxm', 2, 4096, 64, 8, 128, 16, {}),
     ((512,), 132, 167772160, 65536, 8388608.0, 1016800.9696969697)),
    (('sglang', 'h200-sxm', 2, 777, 32, 8, 128, 16, {}),
     ((12,), 132, 19095552, 65536, 8388608.0, 96442.18181818182)),
    (('fa2', 'l40s', 1, 1024, 32, 8, 128, 16, {}),
     ((16,), 284, 12582912, 32768, 2097152.0, 29537.352112676057)),
    (('fa2', 'l40s', 4, 300, 32, 32, 128, 16, {'l2_warm': True}),
     ((7,), 284, 0.0, 32768, 2097152.0, 34614.08450704225)),
    (('flashinfer_attention', 'l40s', 2, 1024, 32, 8, 128, 8, {}),
     ((16,), 284, 20971520.0, 16384, 4194304.0, 59074.704225352114)),
    # one wave of 112 CTAs (stop 48, fa3.causal_grid): each (query tile, KV chunk) its own trips,
    # 7 tiles of 128 packed rows reaching 32, 64, ..., 192, 200 keys, in 2 chunks of 32-key tiles
    # (the longest, 4 trips, was every CTA's before)
    (('flashinfer_attention', 'l40s', 1, 200, 32, 8, 128, 16, {'kv_append': True}),
     ((1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4), 112, 2457600.0, 16384, 2097152.0, 14628.57142857143)),
    (('flashinfer_trtllm', 'b200-sxm', 2, 1024, 32, 8, 128, 16, {}),
     ((16,), 148, 25165824, 65536, 8388608.0, 113359.56756756757)),
    (('flashinfer_trtllm', 'b200-sxm', 1, 3000, 32, 8, 128, 8, {}),
     ((63,), 148, 30720000, 32768, 8388608.0, 166054.05405405405)),
    (('trtllm', 'h200-sxm', 2, 1024, 32, 8, 128, 16, {}),
     ((18,), 132, 25165824, 65536, 8388608.0, 127100.12121212122)),
    (('trtllm', 'h200-sxm', 1, 700, 32, 8, 128, 8, {'fp8_attention': True}),
     ((6,), 132, 4300800, 32768, 8388608.0, 43442.42424242424)),
]


@pytest.mark.parametrize(("shape", "want"), SAME)
def test_prompt_rows_keep_their_work(shape: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    kernel, hw, b, q, h, hk, d, bits, kw = shape
    row = attention_row(b, q, q, h, hk, d, bits, kernel=kernel, sms=load_hardware(hw).compute_units,
                        **kw)
    assert _work(row, hw)[-1] == want


def test_hand_counted_tiles_of_a_chunk() -> None:
    """256 queries after 1024 cached, 32 query / 8 KV heads of 128. FA3 packs the group of 4: eight
    128-row tiles of 32 tokens each; tile j ends at token 1024 + 32 (j + 1): 9 key tiles for j < 4
    (1056..1152 keys), 10 after (1184..1280)."""
    assert causal_tiles(256, 4, 128, 128, 1280) == 4 * 9 + 4 * 10
    assert causal_tiles(256, 4, 128, 128) == causal_tiles(256, 4, 128, 128, 256) == 4 * 1 + 4 * 2
    # one query head, 64-row tiles over 64-key tiles (FA2 at head_dim 128): 17 + 18 + 19 + 20
    assert causal_tiles(256, 1, 64, 64, 1280) == 74


@pytest.mark.parametrize(("kernel", "hw"), ROOMS)
def test_a_chunk_reads_its_cached_prefix_and_pays_for_it(kernel: str, hw: str) -> None:
    spec = load_hardware(hw)
    b, q, kv, h, hk, d, block = 2, 256, 1280, 32, 8, 128, 16

    def row(q_len: int, kv_len: int, kv_block: int | None = None) -> dict[str, Any]:
        return attention_row(b, q_len, kv_len, h, hk, d, 16, kv_block, kernel=kernel,
                             sms=spec.compute_units)

    chunk = row(q, kv, block)
    # bytes: Q of the chunk, K and V of all kv_len keys, the block table (4 B a 16-token block)
    q_bytes, kv_bytes, table = b * q * h * d * 2, b * hk * kv * d * 2 * 2, b * (kv // block) * 4
    assert chunk["kv_block"] == block and chunk["bytes_read"] == q_bytes + kv_bytes + table
    assert _work(chunk, hw)[-1][2] == q_bytes + kv_bytes + table
    # the MMAs cover at least every kept (query, key) pair of every head
    attn = _work(chunk, hw)[-1]
    trips = sum(attn[0]) * attn[1] // len(attn[0])
    assert trips * attn[4] >= 4 * d * h * b * causal_pairs(q, kv)
    out = simulate_launch(chunk, spec)
    assert out.time_s >= 4 * d * h * b * causal_pairs(q, kv) / spec.matrix_peak_flops("fp16")
    assert out.time_s >= (q_bytes + kv_bytes) / spec.dram_bandwidth_Bps()
    alone, whole = simulate_launch(row(q, q), spec).time_s, simulate_launch(row(kv, kv), spec).time_s
    assert alone < out.time_s < whole


@pytest.mark.parametrize(("kernel", "hw"), ROOMS)
def test_more_queries_than_keys_is_an_error_naming_the_row(kernel: str, hw: str) -> None:
    from mpsim import library
    build = library.attention_library(kernel).attention
    assert build is not None
    with pytest.raises(MpsimInputError, match=r"q_len 512, kv_len 256.*expected q_len <= kv_len"):
        build(1, 512, 256, 32, 8, 128, 16, None, on_gpu=True, kv_append=False, l2_warm=False,
              sms=load_hardware(hw).compute_units)


def test_fa3_splits_count_the_cached_keys() -> None:
    """FA3's split heuristic counts n-blocks over max_seqlen_k: one short chunk over a long cache
    (8 query tiles on 132 SMs) splits its keys, as a prompt of that chunk's length does not."""
    assert fa3.fa3_prefill_config(1, 128, 32, 8, 128, sms=132).split_k == 1
    assert fa3.fa3_prefill_config(1, 128, 32, 8, 128, sms=132, kv_len=16384).split_k > 1


def test_an_engine_chunk_in_a_pass_reads_the_paged_cache() -> None:
    """In a pass (serving's iterations), an engine's chunk after cached tokens carries the pass's
    block size (its block table read); the prompt's own row and mpsim's own kernel carry none."""
    from dataclasses import replace

    from mpsim.engines import engine_target, model_heads
    from mpsim.launch_plan import PassShape, pass_attention_row
    from mpsim.models import get_model
    from mpsim.policy import FP16_WEIGHTS, parse_policy

    spec = get_model("mobilellama-1.4b")
    target = engine_target("vllm", parse_policy("fp16"), model_heads(spec.as_dict()), sms=132)
    chunk = PassShape("prefill", 0, 1, 256, 1280, FP16_WEIGHTS, 16, 16, target=target)
    assert pass_attention_row(spec, chunk, 0)["kv_block"] == 16
    assert pass_attention_row(spec, replace(chunk, kv_len=256), 0)["kv_block"] is None
    assert pass_attention_row(spec, replace(chunk, target=None), 0)["kv_block"] is None
