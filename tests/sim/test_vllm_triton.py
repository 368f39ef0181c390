"""vLLM's Triton attention backend (mpsim/library/vllm_triton.py and its work model): the 2D / 3D
dispatch, tiles and segments follow vLLM's source, the rows price as the kernels vLLM launches, and
the published rows that name the backend are priced by it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import attention_kernel, launch_rows
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.library.vllm_triton import (
    live_segments,
    query_block,
    segment_trips,
    threshold_3d,
    tile_size,
)
from mpsim.sim import simulate
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.gpu.library.vllm_triton import append_tile, search_steps
from mpsim.sim.gpu.model import launch_work
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.trace import rows_to_frame

L40S = load_hardware("l40s")
B200 = load_hardware("b200-sxm")


def row(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int = 192,
        kv_bits: int = 8, **kw: object) -> dict:
    return attention_row(batch, q_len, kv_len, heads, kv_heads, head_dim, kv_bits,
                         kernel="vllm_triton", sms=142, **kw)  # type: ignore[arg-type]


def test_query_blocks_and_the_3d_threshold() -> None:
    # BLOCK_M 16 up to a group of 16 (BLOCK_Q = 16 // group), next_pow2(group) above
    assert query_block(8, 1) == (16, 2) and query_block(64, 4) == (16, 1)
    assert query_block(64, 1) == (64, 1) and query_block(4, 4) == (16, 16)
    # 128 // KV heads, snapped to the nearest capture size: 128 / 3 = 42 -> 40
    assert [threshold_3d(h) for h in (1, 2, 4, 8)] == [128, 64, 32, 16]
    assert threshold_3d(3) == 40


def test_tiles_by_form_query_dtype_and_gemma3_window() -> None:
    assert tile_size(192, 0, 1, three_d=True) == 32    # an fp8 query
    assert tile_size(192, 0, 2, three_d=True) == 16    # a 2-byte query
    assert tile_size(192, 0, 2, three_d=False) == 32   # the 2D form
    assert tile_size(256, 1024, 2, three_d=True) == 32  # Gemma 3's window


def test_segments_split_the_tiles_and_a_window_trims_them() -> None:
    # 4096 keys in 32-key tiles over 16 segments: 8 tiles each
    assert segment_trips(4096, 32, 16) == (8,) * 16
    # a 128-key window starts at tile (4096 - 128) // 32 = 124: only the last segment works
    assert segment_trips(4096, 32, 16, 128) == (0,) * 15 + (4,)
    # 100 keys: one tile a segment, four segments hold keys (reduce_segments merges four)
    assert segment_trips(100, 32, 16) == (1, 1, 1, 1) + (0,) * 12
    assert live_segments(100, 32, 16) == 4 and live_segments(4096, 32, 16) == 16
    assert segment_trips(4096, 32, 1) == (128,)


def test_decode_grid_follows_the_batch() -> None:
    small = row(8, 1, 4096, 8, 1)
    cfg, grid = json.loads(small["config"]), json.loads(small["grid"])
    assert small["kernel"] == "vllm_triton_decode" and grid == [8 // 2 + 8, 1, 16]
    assert cfg["segments"] == 16 and cfg["block_n"] == 32 and cfg["block_k"] == 256 and cfg["fp8"] == 1
    big = row(256, 1, 4096, 8, 1)   # above 128 // 1: the 2D form
    cfg, grid = json.loads(big["config"]), json.loads(big["grid"])
    assert grid == [256 // 2 + 256, 1] and cfg["segments"] == 1 and cfg["block_n"] == 32
    assert json.loads(row(32, 1, 4096, 64, 4)["grid"]) == [64, 4, 16]   # 32 <= 128 // 4
    assert json.loads(row(64, 1, 4096, 64, 4)["grid"]) == [128, 4]


def test_prefill_grid_and_errors() -> None:
    p = row(2, 300, 300, 16, 2)
    assert p["kernel"] == "vllm_triton_prefill" and json.loads(p["grid"]) == [2 * 300 // 2 + 2, 2]
    assert row(4, 1, 1, 8, 1)["kernel"] == "vllm_triton_decode"   # a one-token prompt: 3D form
    with pytest.raises(MpsimInputError, match="cached"):
        row(1, 64, 128, 8, 1)
    with pytest.raises(MpsimInputError, match="head_dim >= 32"):
        row(1, 1, 64, 8, 1, head_dim=16)
    with pytest.raises(MpsimInputError, match="16-bit or fp8"):
        row(1, 1, 64, 8, 1, kv_bits=4)
    with pytest.raises(MpsimInputError, match="fp8 query"):
        row(1, 1, 64, 8, 1, kv_bits=16, fp8_attention=True)


def test_search_and_kv_write_tiles() -> None:
    assert [search_steps(n) for n in (1, 2, 3, 128, 2048)] == [1, 2, 2, 8, 12]
    ada, blackwell = gpu_rates(L40S, DEFAULT_PARAMS), gpu_rates(B200, DEFAULT_PARAMS)
    assert append_tile(8 * 192, ada) == 512 and append_tile(8 * 192, blackwell) == 2048
    assert append_tile(192, blackwell) == 256


@pytest.mark.parametrize(("batch", "q_len", "kv_len", "append", "kernels"), [
    (8, 1, 4096, True, 3), (8, 1, 4096, False, 2), (256, 1, 4096, True, 2), (2, 512, 512, True, 2),
    (2, 512, 512, False, 1)])
def test_launch_kernels_count_the_parts(batch: int, q_len: int, kv_len: int, append: bool,
                                        kernels: int) -> None:
    r = row(batch, q_len, kv_len, 8, 1, kv_append=append)
    assert launch_kernels(r) == kernels == len(launch_work(r, gpu_rates(L40S, DEFAULT_PARAMS),
                                                            DEFAULT_PARAMS, 0.0))


def time_s(r: dict, hw: object = L40S) -> float:
    return float(simulate(rows_to_frame([r]), hw, cache_dir=None).launches["time_s"].iloc[0])


def test_longer_caches_cost_more_and_a_window_caps_them() -> None:
    assert time_s(row(4, 1, 1024, 8, 1)) < time_s(row(4, 1, 16384, 8, 1))
    assert time_s(row(4, 1, 4096, 8, 1, window=128)) == pytest.approx(
        time_s(row(4, 1, 65536, 8, 1, window=128)), rel=1e-6)
    assert time_s(row(1, 2048, 2048, 8, 1, window=128)) < time_s(row(1, 2048, 2048, 8, 1))


def test_published_rows_name_the_backend() -> None:
    measured = pd.Series({"framework": "vllm", "kernel_source": "vllm_triton_attn", "q_len": 1,
                          "kv_bits": 8, "cls": "attention decode fp8-kv"})
    assert attention_kernel(measured, L40S) == "vllm_triton"
    assert attention_kernel(measured, B200) == "vllm_triton"


@pytest.mark.parametrize(("q_len", "kernels"), [(1, ["vllm_triton_decode"]), (512, ["vllm_triton_prefill"])])
def test_the_adapter_prices_a_published_row_with_its_kv_write(q_len: int, kernels: list[str]) -> None:
    measured = {"op": "attention", "batch": 4, "q_len": q_len, "kv_len": 512, "heads": 8, "kv_heads": 1,
                "head_dim": 192, "kv_bits": 8, "protocol": "graph", "attn_dtype": "bfloat16",
                "framework": "vllm", "kernel_source": "vllm_triton_attn", "includes": "kv_append",
                "window": 128}
    g = launch_rows(measured, B200)
    assert [r["kernel"] for r in g.launches] == kernels
    cfg = json.loads(g.launches[0]["config"])
    assert cfg["kv_append"] == 1 and cfg["fp8"] == 1 and cfg["window"] == 128
