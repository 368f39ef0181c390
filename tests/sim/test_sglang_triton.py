"""SGLang's Triton attention backend (mpsim/library/sglang_triton.py and its work model): the split
heuristic and tiles follow SGLang's source, the rows price as the kernels SGLang launches, and the
published rows that name it are priced on Hopper only."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import UnrepresentableError, attention_kernel
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.library.sglang_triton import decode_keys, num_kv_splits, prefill_tiles
from mpsim.sim import simulate
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.library.sglang_triton import prefill_spans
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.trace import rows_to_frame

H200 = load_hardware("h200-sxm")


def row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
        kv_bits: int = 16, **kw: object) -> dict:
    return attention_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits,
                         kernel="sglang_triton", sms=132, **kw)  # type: ignore[arg-type]


def test_splits_follow_get_num_kv_splits_triton() -> None:
    # by hand from triton_ops/metadata.py with 132 SMs and at most 8 splits:
    # 1 x 1024 keys, 16/8 heads: 132 x log2(16) = 528 over 8 head blocks -> 66, capped at 8
    assert num_kv_splits(1, 1024, 16, 8) == 8
    # 64 x 256 keys, 16/2 heads: 132 x 2 = 264 over 64 x 2 blocks -> 3; ceil(256 / ceil(256 / 3))
    assert num_kv_splits(64, 256, 16, 2) == 3
    # 2048 x 2 keys: log2(2 / 64) < 1 -> 132 over 16384 blocks -> 1
    assert num_kv_splits(2048, 2, 16, 8) == 1
    # MHA, one sequence: a CTA per query head, 132 x 6 over 1 -> 8
    assert num_kv_splits(1, 4096, 1, 1) == 8


def test_decode_config_grid_tiles_and_window() -> None:
    gqa = row(4, 1, 4096, 16, 2, 512)
    cfg, grid = json.loads(gqa["config"]), json.loads(gqa["grid"])
    assert grid == [4, 2, 8] and cfg["block_m"] == 16 and cfg["block_n"] == 32
    assert cfg["split_keys"] % 32 == 0 and cfg["split_k"] * cfg["split_keys"] >= 4096
    mha = row(4, 1, 4096, 4, 4, 256)
    cfg, grid = json.loads(mha["config"]), json.loads(mha["grid"])
    assert grid == [4, 4, 8] and cfg["block_m"] == 1 and cfg["block_n"] == 64
    # a 1024-key window: SGLang's sliding_window_size is 1023, and its decode reads that many keys
    assert decode_keys(65536, 1024) == 1023 and decode_keys(512, 1024) == 512
    assert json.loads(row(1, 1, 65536, 16, 8, 256, window=1024)["config"])["keys"] == 1023


def test_prefill_tiles_and_the_one_token_prompt() -> None:
    assert prefill_tiles(256) == (128, 64) and prefill_tiles(512) == (32, 64)
    p = row(2, 300, 300, 16, 8, 256)
    assert p["kernel"] == "sglang_triton_prefill" and json.loads(p["grid"]) == [2, 16, 3]
    # a one-token prompt runs the extend kernel (a decode's cache holds at least two tokens)
    assert row(8, 1, 1, 16, 8, 256)["kernel"] == "sglang_triton_prefill"
    assert row(8, 1, 2, 16, 8, 256)["kernel"] == "sglang_triton_decode"
    with pytest.raises(MpsimInputError, match="cached"):
        row(1, 64, 128, 16, 8, 256)
    with pytest.raises(MpsimInputError, match="fp8 cache"):
        row(1, 64, 64, 16, 8, 256, fp8_attention=True)


def test_prefill_spans_skip_the_tiles_outside_the_window() -> None:
    # tile 7 of 128 rows (896..1023) reaches 16 key tiles of 64; under a 512-key window its first
    # row sees keys from 385, so tiles 0..5 (keys < 384) are skipped
    spans = prefill_spans(1024, 128, 64, 512)
    assert spans[7] == (10, 6) and spans[0] == (2, 0)
    assert prefill_spans(1024, 128, 64, 0)[7] == (16, 0)


@pytest.mark.parametrize(("q_len", "kv_len", "kv_bits", "fp8", "kernels"), [
    (1, 4096, 16, False, 3), (1, 4096, 8, False, 5), (512, 512, 16, False, 4),
    (512, 512, 8, False, 6), (512, 512, 8, True, 4), (1, 1, 16, False, 4)])
def test_launch_kernels_count_the_parts(q_len: int, kv_len: int, kv_bits: int, fp8: bool,
                                        kernels: int) -> None:
    r = row(2, q_len, kv_len, 16, 8, 256, kv_bits, fp8_attention=fp8)
    rates = gpu_rates(H200, DEFAULT_PARAMS)
    assert launch_kernels(r) == kernels == len(launch_work(r, rates, DEFAULT_PARAMS, 0.0))


def time_s(r: dict) -> float:
    return float(simulate(rows_to_frame([r]), H200, cache_dir=None).launches["time_s"].iloc[0])


def test_longer_caches_cost_more_and_a_window_caps_them() -> None:
    assert time_s(row(4, 1, 1024, 16, 2, 512)) < time_s(row(4, 1, 16384, 16, 2, 512))
    assert time_s(row(4, 1, 2048, 16, 8, 256, window=1024)) == pytest.approx(
        time_s(row(4, 1, 65536, 16, 8, 256, window=1024)), rel=1e-6)
    assert time_s(row(1, 2048, 2048, 16, 8, 256, window=1024)) < time_s(row(1, 2048, 2048, 16, 8, 256))


def test_published_rows_name_the_backend_on_hopper_only() -> None:
    measured = pd.Series({"framework": "sglang", "kernel_source": "triton", "q_len": 1,
                          "kv_bits": 16, "cls": "attention decode kv16"})
    assert attention_kernel(measured, H200) == "sglang_triton"
    with pytest.raises(UnrepresentableError, match="hopper"):
        attention_kernel(measured, load_hardware("b200-sxm"))
