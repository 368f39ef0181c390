"""FlashAttention-2 and FlashInfer rooms (mpsim/library/fa2.py, flashinfer_attention.py and their
work models): the configs follow the libraries' own rules, and the work models price the rows."""

from __future__ import annotations

import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.library.fa2 import align_block_n, fa2_num_splits, split_block_n
from mpsim.library.flashinfer_attention import cta_tile_q, kv_chunks
from mpsim.sim import simulate
from mpsim.sim.gpu.library.flashinfer_attention import fi_kv_tile
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.trace import rows_to_frame

L40S = load_hardware("l40s")


def test_fa2_split_heuristic_skips_ineligible_splits() -> None:
    # flash_api.cpp num_splits_heuristic: 64 blocks, 11 splits give 6 blocks each as 12 would
    assert fa2_num_splits(300, 284, 64) == 1          # fills >= 80% of the slots
    assert fa2_num_splits(8, 284, 4) == 4             # at most the key blocks
    s = fa2_num_splits(32, 284, 64)
    assert s > 1 and -(-64 // s) != -(-64 // (s - 1))


def test_fa2_tiles_by_head_dim() -> None:
    assert [split_block_n(d) for d in (64, 128, 256)] == [256, 128, 64]
    assert [align_block_n(d) for d in (64, 128, 256)] == [128, 64, 64]


def test_fa2_decode_packs_the_group_and_mha_does_not_split() -> None:
    gqa = json.loads(attention_row(1, 1, 4096, 32, 8, 128, kernel="fa2", sms=142)["config"])
    assert gqa["rows"] == 4 and gqa["split_k"] > 1 and gqa["block_n"] == 128
    mha = attention_row(1, 1, 4096, 32, 32, 128, kernel="fa2", sms=142)
    cfg = json.loads(mha["config"])
    assert cfg["split_k"] == 1 and cfg["block_n"] == 64 and json.loads(mha["grid"]) == [1, 1, 32]
    with pytest.raises(MpsimInputError, match="16-bit KV cache"):
        attention_row(1, 1, 4096, 32, 8, 128, kv_bits=8, kernel="fa2")


def test_flashinfer_tile_and_chunk_rules() -> None:
    assert [cta_tile_q(n, 128) for n in (4, 16, 17, 64, 65)] == [16, 16, 64, 64, 128]
    assert cta_tile_q(512, 256) == 64
    # one request, 8 KV heads, 142 SMs: chunks of >= 128 tokens, work items within 2 x SMs / 8
    c = kv_chunks(1, 1, 8192, 8, 142)
    assert c * 1 <= (2 * 142) // 8 and c > 1
    assert kv_chunks(1, 1, 100, 8, 142) == 1
    r = gpu_rates(L40S, DEFAULT_PARAMS)
    bn, ctas, warps_q = fi_kv_tile(16, 128, 1, r)
    assert warps_q == 1 and bn % 64 == 0 and ctas in (1, 2)


@pytest.mark.parametrize(("kernel", "kv_bits", "q_len"), [
    ("fa2", 16, 1), ("fa2", 16, 512), ("flashinfer_attention", 8, 1),
    ("flashinfer_attention", 8, 512), ("flashinfer_attention", 16, 1)])
def test_the_rows_price_and_longer_caches_cost_more(kernel: str, kv_bits: int, q_len: int) -> None:
    def t(kv: int) -> float:
        q = q_len if q_len == 1 else kv // 2
        row = attention_row(8, q, kv if q_len == 1 else q, 32, 8, 128, kv_bits=kv_bits,
                            kernel=kernel, sms=142, kv_append=True, l2_warm=q_len == 1)
        return float(simulate(rows_to_frame([row]), L40S, cache_dir=None).launches["time_s"].iloc[0])
    assert 0 < t(1024) < t(8192)


def test_fa2_decode_ctas_fixed_work_holds_its_sm() -> None:
    """Two resident CTAs an SM (head_dim 64) do not overlap their fixed work (`fa2.cta_ns`): a grid
    of two waves' worth of one-row CTAs costs about one more cta_ns an SM than a grid of one."""
    from dataclasses import replace

    from mpsim.sim.launch import price_launch

    p = replace(DEFAULT_PARAMS, fa2=replace(DEFAULT_PARAMS.fa2, cta_ns=20_000.0))

    def time(batch: int) -> float:  # MHA, 2 heads: one one-row CTA a (sequence, head)
        row = attention_row(batch, 1, 16, 2, 2, 64, kernel="fa2", sms=142)
        assert json.loads(row["config"])["rows"] == 1
        return float(price_launch(row, L40S, params=p)["time_s"])

    # 142 CTAs: one an SM; 284: two an SM, resident together (an overlapped prologue: the same time)
    one, two = time(71), time(142)
    assert two - one == pytest.approx(20e-6, rel=0.15)


def test_a_one_wave_causal_grid_runs_each_ctas_own_tiles() -> None:
    """fa3.causal_grid: one wave (CTAs <= slots) keeps each CTA's trips by its class (id modulo the
    query tiles); more waves deal the trips over the slots, the longest CTA at least."""
    from mpsim.sim.gpu.library.fa3 import causal_grid

    assert causal_grid((1, 2, 3), 6, 10) == ((1, 2, 3), "inner", 6)
    assert causal_grid((1, 2, 3), 30, 10) == ((6,), "single", 10)    # 60 trips over 10 slots
    assert causal_grid((1, 2, 9), 6, 4) == ((9,), "single", 4)       # the longest CTA binds


def test_a_one_wave_prefill_is_set_by_its_longest_ctas_not_all_of_them() -> None:
    """A long prompt over few heads is one wave on L40S (FA2, 8192 tokens: 128 query tiles of 64
    rows a head), more CTAs than SMs: an SM holding the longest CTA holds a shorter one with it, so
    the grid takes well under twice the grid of half the heads (one CTA an SM); priced as every CTA
    the longest (before stop 48) it took about twice. FlashInfer's one-wave grid keeps its classes
    too (its KV chunks split the few-CTA grids, so no one-CTA-an-SM twin)."""
    from mpsim.sim.gpu.model import launch_work
    from mpsim.sim.launch import price_launch

    heads = 2

    def row(h: int, kernel: str = "fa2") -> dict:
        return attention_row(1, 8192, 8192, h, h, 128, kv_bits=16, kernel=kernel, sms=142)

    r = gpu_rates(L40S, DEFAULT_PARAMS)
    work = launch_work(row(heads), r, DEFAULT_PARAMS, 0.0)[-1].work
    assert work.layout == "inner" and r.sms < work.total_ctas <= 2 * r.sms
    spans = work.iters_by_class
    assert list(spans) == sorted(spans) and spans[-1] > 4 * spans[0]  # causal: the last tile longest
    half = launch_work(row(heads // 2), r, DEFAULT_PARAMS, 0.0)[-1].work
    assert half.total_ctas <= r.sms and half.iters_by_class == spans
    full, alone = (float(price_launch(row(h), L40S)["time_s"]) for h in (heads, heads // 2))
    assert alone < full < 1.5 * alone
    fi = launch_work(row(4, "flashinfer_attention"), r, DEFAULT_PARAMS, 0.0)[-1].work
    assert fi.layout == "inner" and fi.total_ctas == 256 and len(fi.iters_by_class) == 64
    assert list(fi.iters_by_class) == sorted(fi.iters_by_class)


def test_flashinfer_walks_a_sliding_window_not_the_cache() -> None:
    """prefill.cuh starts a query tile at its first row's window (kv_start_idx) and the plan sizes
    the KV chunks on the window's pages: a windowed decode over a long cache costs what one over the
    window does, and a windowed prefill tile walks its window plus its own tokens."""
    from mpsim.library.flashinfer_attention import window_pages
    from mpsim.sim.gpu.library.flashinfer_attention import fi_spans

    assert window_pages(65536, 128, 16) == 9 and window_pages(64, 128, 16) == 4
    assert window_pages(65536, 0, 16) == 4096
    assert fi_spans(1, 65536, 8, 16, 128) == [128] and fi_spans(1, 100, 8, 16, 128) == [100]
    # 128-row tiles of 32 tokens (group 4): the fifth tile on reaches 127 keys back from its first row
    spans = fi_spans(512, 512, 4, 128, 128)
    assert spans[:4] == [32, 64, 96, 128] and set(spans[5:]) == {159}

    def time_s(kv_len: int, window: int) -> float:
        row = attention_row(8, 1, kv_len, 32, 8, 128, 8, kernel="flashinfer_attention", sms=142,
                            window=window)
        return float(simulate(rows_to_frame([row]), L40S, cache_dir=None).launches["time_s"].iloc[0])

    assert time_s(65536, 128) == pytest.approx(time_s(4096, 128), rel=1e-6)
    assert time_s(65536, 128) < time_s(65536, 0) / 10
    cfg = json.loads(attention_row(8, 1, 65536, 32, 8, 128, 8, kernel="flashinfer_attention",
                                   sms=142, window=128)["config"])
    assert cfg["window"] == 128 and cfg["split_k"] == kv_chunks(8, 1, 65536, 8, 142, 128, 16)
