"""TensorRT-LLM's and SGLang's attention ops (mpsim/library/trtllm_attention.py: the dispatch rule and
configs, sglang.py; mpsim/sim/gpu/library/trtllm_attention.py, sglang.py: the work models)."""

from __future__ import annotations

import json

import pytest

from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import attention_row
from mpsim.library import fa3, sglang
from mpsim.library import trtllm_attention as lc
from mpsim.library.trtllm_attention import (
    mmha_active_keys,
    mmha_dh_max,
    mmha_loop_keys,
    mmha_splits,
    mmha_threads_per_key,
    mmha_tile_keys,
    xqa_multi_block,
)
from mpsim.sim.gpu.library.fa3 import causal_tiles
from mpsim.sim.gpu.library.sglang import store_splits
from mpsim.sim.replay import simulate_launch

H200: GpuSpec = load_hardware("h200-sxm")  # type: ignore[assignment]
SMS = 132


# (batch, heads, kv_heads, head_dim, kv_len, fp8 KV) -> the kernel, each row a published H200
# TRT-LLM 1.3.0rc20 generation row's shape and what the rule (decoderXQARunner.cpp shouldUse,
# kernelUtils.cpp supportConfig*) says ran it
DISPATCH = [
    ((1, 32, 8, 128, 128, False), lc.TRTLLM_MMHA),   # 8 KV-head CTAs x 4 < 132 SMs: no gain
    ((8, 32, 8, 128, 128, False), lc.TRTLLM_XQA),    # 64 x 4 >= 132
    ((1, 32, 8, 128, 1024, False), lc.TRTLLM_XQA),   # history 1024 // 128 = 8 blocks: 64 x 4
    ((1, 32, 8, 128, 128, True), lc.TRTLLM_XQA),     # e4m3 cache + bf16 input: MMHA cannot
    ((64, 32, 32, 128, 1024, False), lc.TRTLLM_MMHA),  # vanilla MHA never runs XQA
    ((64, 32, 32, 128, 1024, True), lc.TRTLLM_MMHA),
    ((64, 64, 1, 128, 1024, True), lc.TRTLLM_MMHA),  # group 64 > 32
    ((64, 32, 1, 128, 1024, True), lc.TRTLLM_XQA),   # group 32 is the limit
    ((64, 32, 8, 512, 1024, True), lc.TRTLLM_MMHA),  # head_dim > 256
]


@pytest.mark.parametrize(("shape", "kernel"), DISPATCH)
def test_trtllm_dispatch_rule(shape: tuple[int, int, int, int, int, bool], kernel: str) -> None:
    assert lc.trtllm_decode_kernel(*shape, sms=SMS) == kernel


def test_xqa_multi_block_count_follows_compute_multi_block_count() -> None:
    assert xqa_multi_block(1, 8, 128, SMS) == 1            # history 128 // 128
    assert xqa_multi_block(1, 8, 256, SMS) == 2            # 256 // 128 (the rows' doubling)
    assert xqa_multi_block(1, 8, 1024, SMS) == 8           # 1024 // 128, at sqrt(8 x 8)
    assert xqa_multi_block(1, 8, 8192, SMS) == 23          # 64 capped at round(sqrt(512))
    assert xqa_multi_block(8, 8, 8192, SMS) == 16          # 23 / (8 x 8 x 23 / 132 / 8)
    assert xqa_multi_block(256, 8, 8192, SMS) == 1


def test_trtllm_rows_pick_their_kernel_and_config() -> None:
    gmma = attention_row(8, 1, 1024, 32, 8, 128, 8, kernel="trtllm", sms=SMS)
    hmma = attention_row(8, 1, 1024, 32, 8, 128, 16, kernel="trtllm", sms=SMS)
    mmha = attention_row(8, 1, 1024, 32, 32, 128, 16, kernel="trtllm", sms=SMS)
    assert (gmma["kernel"], hmma["kernel"], mmha["kernel"]) == (lc.TRTLLM_XQA, lc.TRTLLM_XQA,
                                                                 lc.TRTLLM_MMHA)
    g, h = json.loads(gmma["config"]), json.loads(hmma["config"])
    assert (g["gmma"], g["block_m"], h["gmma"], h["block_m"]) == (1, 64, 0, 16)
    with pytest.raises(MpsimInputError, match="got 4 bits"):
        attention_row(8, 1, 1024, 32, 8, 128, 4, kernel="trtllm")
    with pytest.raises(MpsimInputError, match="context FMHA"):
        attention_row(8, 1, 1024, 32, 8, 128, 16, kernel="trtllm", fp8_attention=True)


def _us(row: dict) -> float:
    return simulate_launch(row, H200).time_s * 1e6


@pytest.mark.parametrize(("heads", "kv_heads", "bits"), [(32, 8, 16), (32, 8, 8), (32, 32, 16)])
def test_decode_time_grows_with_the_cache_and_the_batch(heads: int, kv_heads: int, bits: int) -> None:
    times = [_us(attention_row(b, 1, kv, heads, kv_heads, 128, bits, kernel="trtllm", sms=SMS))
             for b, kv in ((8, 1024), (8, 8192), (8, 65536))]
    assert times[0] < times[1] < times[2]
    by_batch = [_us(attention_row(b, 1, 4096, heads, kv_heads, 128, bits, kernel="trtllm", sms=SMS))
                for b in (16, 64, 256)]
    assert by_batch[0] < by_batch[1] < by_batch[2]


def test_fp8_cache_moves_half_the_bytes_and_is_faster_when_large() -> None:
    bf16 = simulate_launch(attention_row(8, 1, 65536, 32, 8, 128, 16, kernel="trtllm"), H200)
    fp8 = simulate_launch(attention_row(8, 1, 65536, 32, 8, 128, 8, kernel="trtllm"), H200)
    assert fp8.bytes_dram < 0.55 * bf16.bytes_dram
    assert fp8.time_s < 0.7 * bf16.time_s


def test_context_fmha_fp8_runs_faster_than_bf16_and_grows_with_the_prompt() -> None:
    bf16 = [_us(attention_row(4, q, q, 32, 8, 128, 16, kernel="trtllm")) for q in (1024, 4096, 8192)]
    fp8 = _us(attention_row(4, 8192, 8192, 32, 8, 128, 8, kernel="trtllm", fp8_attention=True))
    assert bf16[0] < bf16[1] < bf16[2]
    assert fp8 < bf16[2]


def test_fa3_prefill_packs_the_query_group() -> None:
    """Pack-GQA: 32 tokens x group 8 fill two 128-row tiles per KV head instead of one tile per
    query head, each reaching the keys of its last row's token."""
    assert causal_tiles(32, 1, 128, 128) == 1
    assert causal_tiles(32, 8, 128, 128) == 2
    assert causal_tiles(256, 1, 128, 128) == 3                # 1 + 2
    assert causal_tiles(256, 4, 128, 128) == 1 + 1 + 1 + 1 + 2 + 2 + 2 + 2
    packed = json.loads(attention_row(64, 32, 32, 32, 4, 128, kernel="fa3")["config"])
    plain = json.loads(attention_row(64, 32, 32, 32, 32, 128, kernel="fa3")["config"])
    assert (packed["pack_gqa"], plain["pack_gqa"]) == (1, 0)
    assert _us(attention_row(64, 32, 32, 32, 4, 128, kernel="fa3")) < \
        _us(attention_row(64, 32, 32, 32, 32, 128, kernel="fa3"))


def test_sglang_fa3_rows_are_fa3_kernels_with_sglang_names() -> None:
    s = attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="sglang", l2_warm=True, sms=SMS)
    v = attention_row(8, 1, 4096, 32, 8, 128, 16, kernel="fa3", kv_append=True, l2_warm=True, sms=SMS)
    assert s["kernel"] == sglang.SGLANG_FA3_DECODE and v["kernel"] == fa3.FA3_DECODE
    assert json.loads(s["config"]) == json.loads(v["config"])
    assert _us(s) != _us(v)  # the same kernels, a different op around them


def test_sglang_stores_the_new_kv_with_its_own_warp_per_token_kernel() -> None:
    """SGLang's store_cache: a warp per (token, split), 128-thread blocks, 16 an SM, where vLLM's
    reshape_and_cache_flash runs a block of up to 512 threads per token, four an SM: at 64 prompts of
    64 tokens (4096 tokens, 4 heads of 128) the H200 tables time SGLang's prefill op 17.2 us and
    vLLM's 31.6 us on the same FA3 kernel."""
    assert (store_splits(8 * 128 * 2), store_splits(4 * 128 * 2), store_splits(2 * 64 * 2)) == (4, 2, 1)
    s = _us(attention_row(64, 64, 64, 4, 4, 128, 16, kernel="sglang", sms=SMS))
    v = _us(attention_row(64, 64, 64, 4, 4, 128, 16, kernel="fa3", kv_append=True, sms=SMS))
    assert s < 0.7 * v
    # one prompt: one round of either store, so only the ops' scopes differ (12.2 against 14.3 us
    # measured at 32 / 8 heads): the gap is the store's rounds
    s1 = _us(attention_row(1, 64, 64, 32, 8, 128, 16, kernel="sglang", sms=SMS))
    v1 = _us(attention_row(1, 64, 64, 32, 8, 128, 16, kernel="fa3", kv_append=True, sms=SMS))
    assert s1 < v1 and v1 - s1 < 0.25 * (v - s)


def test_mmha_tiles_count_the_new_token_and_size_thread_groups_by_dh_max() -> None:
    """multi_block_grid_setup: tiles = clamp(balanced, 1, ceil((tlength + 1) / keys per loop)) with
    tlength = kv_len; the groups by dh_max (head 96 runs the 128 kernel; 32 is the least). One tile
    loops over the cached keys (kv_len - 1: the new one is scored before the loop); tiles of the
    multi-block kernel over ceil((tlength + 1) / tiles)."""
    assert (mmha_dh_max(64), mmha_dh_max(96), mmha_dh_max(16), mmha_dh_max(256)) == (64, 128, 32, 256)
    assert mmha_threads_per_key(128) == 16 and mmha_threads_per_key(512) == 32
    assert mmha_loop_keys(1024, 128) == 512 and mmha_loop_keys(1024, 96) == 512
    # batch 1, 32 query heads: 1024-thread blocks, 512 keys a loop; the rows step at 512 cached keys
    assert mmha_splits(1, 32, 128, 511, SMS) == 1 and mmha_splits(1, 32, 128, 512, SMS) == 2
    assert mmha_tile_keys(511, 1) == 510 and mmha_tile_keys(512, 2) == 257
    # 512-thread blocks run one an SM (MMHA_RESIDENT): batch 8 x 32 heads keeps one tile at 256 keys
    assert lc.mmha_threads(8, 32, SMS) == 512 and mmha_splits(8, 32, 128, 256, SMS) == 1


def test_mmha_first_loop_runs_only_the_warps_of_its_keys() -> None:
    """A tile shorter than one pass (K_PER_ITER key slots) leaves whole warps idle: head 128 at 1024
    threads has 64 slots, two a warp, four unrolled keys each (K_LOOP_UNROLL: 8 keys a warp)."""
    assert [mmha_active_keys(1024, 128, kv) for kv in (1, 8, 9, 31, 64, 300)] == \
        [8, 8, 16, 32, 64, 64]
    assert mmha_active_keys(1024, 256, 10) == 12 and mmha_active_keys(256, 64, 300) == 32
    times = [_us(attention_row(1, 1, kv, 32, 32, 128, 16, kernel="trtllm", sms=SMS))
             for kv in (8, 32, 65, 256)]
    # the H200 rows: 8.7, 9.4, 11.0, 11.3 us: flat once every warp runs, rising before
    assert times[0] < times[1] < times[2] == pytest.approx(times[3], rel=1e-6)
