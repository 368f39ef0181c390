"""Sliding-window attention: the keys a query sees (traces/accounting.py), the tiles FA3 visits
(hopper/block.h get_n_block_min_max), what each room models (launch_plan.attention_row), and the
measured rows' `window` through the adapter (docs/validation.md#sliding-window-attention-stop-44)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pandas as pd
import pytest

from mpsim.analysis.validation.adapter import launch_rows
from mpsim.errors import MpsimInputError
from mpsim.hw_models import load_hardware
from mpsim.launch_plan import attention_row
from mpsim.library import fa3
from mpsim.library.rows import window_first_block
from mpsim.sim.gpu.library.fa3 import tile_spans
from mpsim.sim.launch import simulate_launch
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from traces.accounting import causal_pairs

H200 = load_hardware("h200-sxm")


def _keys_seen(q: int, kv: int, window: int) -> list[range]:
    """Each query's keys, by brute force: the last q of kv positions, causal, at most `window`."""
    return [range(max(0, p - window + 1) if window else 0, p + 1) for p in range(kv - q, kv)]


@pytest.mark.parametrize(("q", "kv", "window"), list(itertools.product(
    (1, 2, 5, 128, 300), (300, 512, 1000), (0, 1, 7, 128, 299, 300, 600, 2000))))
def test_causal_pairs_count_each_querys_window(q: int, kv: int, window: int) -> None:
    if q <= kv:
        assert causal_pairs(q, kv, window) == sum(len(r) for r in _keys_seen(q, kv, window))


@pytest.mark.parametrize(("q", "kv", "window", "group", "bm", "bn"), [
    (1, 1024, 128, 1, 64, 128), (1, 1000, 128, 8, 64, 128), (1, 4096, 1024, 4, 64, 128),
    (512, 512, 128, 1, 128, 128), (512, 512, 128, 4, 128, 128), (300, 1300, 100, 2, 128, 64),
    (1000, 1000, 333, 3, 128, 128)])
def test_tile_spans_are_the_tiles_holding_a_visible_key(q: int, kv: int, window: int, group: int,
                                                       bm: int, bn: int) -> None:
    """FA3's range per query tile (its first row's window start to its last row's key) is the span
    of key tiles its rows' windows touch, counted key by key."""
    seen = _keys_seen(q, kv, window)
    spans = tile_spans(q, group, bm, bn, kv, window)
    for j, span in enumerate(spans):
        tokens = range(j * bm // group, min(q, ((j + 1) * bm - 1) // group + 1))
        touched = {key // bn for t in tokens for key in seen[t]}
        assert span == max(touched) - min(touched) + 1
    assert window_first_block(kv - 1, 0, bn) == 0  # no window: from the first tile


def test_a_covering_window_is_no_window() -> None:
    """kv_len <= window: the same row (FA's flash_api drops such a window), in every room."""
    for kernel in ("fa3", "trtllm", "flashinfer_trtllm", None):
        full = attention_row(4, 1, 1024, 32, 8, 128, 16, kernel=kernel, sms=132)
        assert attention_row(4, 1, 1024, 32, 8, 128, 16, kernel=kernel, sms=132, window=1024) == full
    with pytest.raises(MpsimInputError, match="sliding window is >= 0 keys"):
        attention_row(4, 1, 1024, 32, 8, 128, 16, kernel="fa3", sms=132, window=-1)


def test_fa3_window_in_the_config_and_its_split_heuristic() -> None:
    """A binding window is the config's `window`; FA3's split heuristic counts the loaded keys
    (flash_api.cpp: min(kv, W + kBlockM)): one sequence over 64K keys splits without a window and
    not with a window of 128 (2 n-blocks)."""
    full = json.loads(attention_row(1, 1, 65536, 32, 8, 128, 16, kernel="fa3", sms=132)["config"])
    win = json.loads(attention_row(1, 1, 65536, 32, 8, 128, 16, kernel="fa3", sms=132,
                                   window=128)["config"])
    assert full["split_k"] > 1 and "window" not in full
    assert win["split_k"] == 1 and win["window"] == 128
    assert fa3.loaded_keys(65536, 128) == 256 and fa3.loaded_keys(200, 128) == 200


def test_windowed_decode_is_priced_by_its_window_not_its_cache() -> None:
    """FA3 decode under a window of 4096: the same time at 8K and 64K cached keys (aligned: the
    same tiles, bytes and splits), far below the full decode at 64K, above its own roofline bound
    (whose bytes are the window's keys)."""
    def run(kv: int, window: int = 0) -> float:
        row = attention_row(16, 1, kv, 32, 8, 128, 16, kernel="fa3", sms=132, window=window)
        out = simulate_launch(row, H200)  # below its roofline bound: BelowBoundError
        if window:
            assert row["bytes_read"] < 16 * 8 * window * 128 * 2 * 2 + 16 * 32 * 128 * 2 + 1
        return out.time_s
    assert run(8192, 4096) == run(65536, 4096)
    assert run(65536, 4096) < 0.25 * run(65536)


def test_rooms_say_which_windows_they_model() -> None:
    with pytest.raises(MpsimInputError, match=r"window of 128 keys over 1024 is not modelled for "
                                              r"mpsim's kernels \(the rooms that take one: trtllm, "
                                              r"fa3"):
        attention_row(4, 1, 1024, 32, 8, 128, 16, window=128)
    covered = attention_row(1, 512, 512, 32, 8, 128, 16, kernel="sglang", sms=132, window=512)
    assert covered == attention_row(1, 512, 512, 32, 8, 128, 16, kernel="sglang", sms=132)


def test_sglang_windows_take_fa3s_tiles_without_vllms_window_costs() -> None:
    """SGLang's FA3 op under a sliding window (GPT-OSS's SWA layers in its published rows): FA3's
    configs (the window in the config, the split heuristic over the loaded keys), none of the
    per-window decode costs set on vLLM's rows (SglangParams.window_*: 0); with FA3's values it
    would cost more."""
    sg = attention_row(16, 1, 4096, 32, 8, 128, 16, kernel="sglang", sms=132, window=128)
    vl = attention_row(16, 1, 4096, 32, 8, 128, 16, kernel="fa3", sms=132, window=128)
    cs, cv = json.loads(sg["config"]), json.loads(vl["config"])
    assert cs["window"] == cv["window"] == 128 and cs["split_k"] == cv["split_k"]
    p = DEFAULT_PARAMS
    costs = replace(p, sglang=replace(p.sglang, window_mask_ops=p.fa3.window_mask_ops,
                                      window_cta_ns=p.fa3.window_cta_ns))
    assert simulate_launch(sg, H200).time_s < simulate_launch(sg, H200, costs).time_s
    assert simulate_launch(sg, H200).time_s < 0.2 * simulate_launch(
        attention_row(16, 1, 65536, 32, 8, 128, 16, kernel="sglang", sms=132), H200).time_s
    prefill = attention_row(1, 2048, 2048, 32, 8, 128, 16, kernel="sglang", sms=132, window=128)
    assert json.loads(prefill["config"])["window"] == 128


def test_fa2_decode_under_any_window_is_not_swapped() -> None:
    """vLLM's FA2 decode under a window (W - 1, 0): flash_api.cpp's GQA swap needs a negative right
    bound, so even a covering window runs a CTA per query head with one live row and one split;
    a binding one walks its window's tiles. The published L40S rows: a covering window costs about
    1.6x the swapped decode at batch 16-128 (docs/validation.md#sliding-window-attention-stop-44)."""
    def cfg(kv: int, window: int = 0) -> dict[str, int]:
        return json.loads(attention_row(16, 1, kv, 32, 8, 128, 16, kernel="fa2", sms=142,
                                        window=window)["config"])
    swapped, covered, bound = cfg(1024), cfg(1024, 2048), cfg(4096, 128)
    assert swapped["rows"] == 4 and "window" not in swapped
    assert covered["rows"] == 1 and covered["split_k"] == 1 and "window" not in covered
    assert bound["rows"] == 1 and bound["window"] == 128
    l40s = load_hardware("l40s")
    def price(kv: int, window: int = 0) -> float:
        return simulate_launch(attention_row(16, 1, kv, 32, 8, 128, 16, kernel="fa2", sms=142,
                                             window=window), l40s).time_s
    assert price(1024, 2048) > price(1024)          # the unswapped path costs more
    assert price(8192, 128) == price(65536, 128)    # the window's tiles, whatever the cache


def _measured(window: object, framework: str, source: str) -> dict[str, object]:
    return {"op": "attention", "batch": 8, "q_len": 1, "kv_len": 4096, "heads": 32, "kv_heads": 8,
            "head_dim": 128, "kv_bits": 16, "window": window, "protocol": "graph",
            "includes": "kv_append", "framework": framework, "kernel_source": source,
            "attn_dtype": "bfloat16"}


def test_the_adapter_passes_the_rows_window_to_its_kernels_room() -> None:
    """A measured row's `window` reaches the room: FA3 prices it (the config's window), TensorRT-
    LLM's op takes it on Hopper and Ada, FlashInfer's too (its kernels walk the window), an empty
    cell is no window."""
    fa3_rows = launch_rows(_measured(128, "vllm", "vllm_flash_attn_fa3"), H200).launches
    assert json.loads(fa3_rows[-1]["config"])["window"] == 128
    assert "window" not in json.loads(launch_rows(_measured(pd.NA, "vllm", "vllm_flash_attn_fa3"),
                                                  H200).launches[-1]["config"])
    trt = launch_rows(_measured(128, "trtllm", "torch_flow"), H200).launches
    assert json.loads(trt[-1]["config"])["window"] == 128
    ada = launch_rows(_measured(128, "trtllm", "torch_flow"), load_hardware("l40s")).launches
    assert json.loads(ada[-1]["config"])["window"] == 128   # the Ada room's decode kernels too
    fi = launch_rows(_measured(128, "vllm", "vllm_flashinfer_fidecode"), load_hardware("l40s")).launches
    assert json.loads(fi[-1]["config"])["window"] == 128


@pytest.mark.parametrize(("kernel", "hw", "kv_bits"), [
    ("trtllm", "h200-sxm", 8), ("trtllm", "h200-sxm", 16), ("flashinfer_trtllm", "b200-sxm", 16),
    ("trtllm_sm100", "b200-sxm", 8), ("sglang", "h200-sxm", 16), ("sglang", "h200-sxm", 8)])
def test_windowed_decode_in_the_other_rooms(kernel: str, hw: str, kv_bits: int) -> None:
    """TensorRT-LLM's XQA / MMHA on Hopper, the trtllm-gen kernels on Blackwell and SGLang's FA3 op: a binding
    window's config carries it, its time is below the full cache's and not below its roofline
    (simulate_launch checks), and it does not grow past the window where the split count stays."""
    spec = load_hardware(hw)

    def run(kv: int, window: int = 0) -> float:
        row = attention_row(64, 1, kv, 32, 8, 128, kv_bits, kernel=kernel, sms=spec.compute_units,
                            window=window)
        assert json.loads(row["config"]).get("window", 0) == (window if window < kv else 0)
        return simulate_launch(row, spec).time_s
    assert run(32768, 1024) < 0.2 * run(32768)
    assert run(4096, 1024) <= run(32768, 1024) < 1.5 * run(4096, 1024)


def test_trtllm_context_window_prices_its_edge_tiles() -> None:
    """The context FMHA under a window: the tile range of FA3's rule (one query head a tile), its
    two masked edge tiles at `fmha_window_eta`, the rest at `fmha_eta`."""
    from mpsim.sim.gpu.library.trtllm_attention import diagonal_steps, window_eta
    from mpsim.sim.params import DEFAULT_PARAMS
    t = DEFAULT_PARAMS.trtllm
    assert diagonal_steps(2, 1024, 1024, 4, 128, 128, 128) == 2 * 4 * (1 + 2 * 7)
    assert diagonal_steps(2, 1024, 1024, 4, 128, 128) == 2 * 4 * sum(range(1, 9))
    assert window_eta(2.0, t) == pytest.approx(t.fmha_window_eta)
    assert t.fmha_window_eta < window_eta(64.0, t) < t.fmha_eta
    full = simulate_launch(attention_row(1, 8192, 8192, 32, 8, 128, 16, kernel="trtllm", sms=132),
                           H200).time_s
    win = simulate_launch(attention_row(1, 8192, 8192, 32, 8, 128, 16, kernel="trtllm", sms=132,
                                        window=128), H200).time_s
    assert win < 0.25 * full


@pytest.mark.parametrize("head_dim", [64, 192])
def test_trtllm_fp8_context_window_pays_its_masked_scores(head_dim: int) -> None:
    """The FP8 FMHA (an fp8 cache, or fp8 compute) under a binding window: the tile range at
    `fmha_fp8_eta`, plus `fmha_fp8_mask_ops` fp32 lane-ops per score of the two masked edge tiles,
    which weigh more at head_dim 64 (fewer MMA flops a score) than at 192, as the H200 rows do."""
    from mpsim.sim.gpu.library.trtllm_attention import fp8_window_ops
    t = DEFAULT_PARAMS.trtllm
    assert fp8_window_ops(2.0, 128, 128, t) == 128 * 128 * t.fmha_fp8_mask_ops
    assert fp8_window_ops(8.0, 128, 128, t) == pytest.approx(fp8_window_ops(2.0, 128, 128, t) / 4)

    def price(kv_bits: int, window: int, params: SimParams = DEFAULT_PARAMS) -> float:
        row = attention_row(4, 4096, 4096, 32, 8, head_dim, kv_bits, kernel="trtllm", sms=132,
                            window=window)
        return simulate_launch(row, H200, params).time_s
    free = replace(DEFAULT_PARAMS, trtllm=replace(t, fmha_fp8_mask_ops=0.0))
    assert price(8, 128, free) < price(8, 128) < price(8, 0)
    ratio = price(8, 128) / price(16, 128)   # fp8 over bf16 windowed: above 1 at 64, near 1 at 192
    assert ratio > 1.15 if head_dim == 64 else 0.9 < ratio < 1.15


def test_op_takes_a_window_for_the_kernel_or_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    """`mpsim op attention --window`: priced by --engine's room (the window in its config), one
    error for mpsim's own kernels, whose room models no binding window."""
    from mpsim.cli import main
    shape = ["op", "attention", "--batch", "8", "--q-len", "1", "--kv-len", "32768", "--heads", "32",
             "--kv-heads", "8", "--head-dim", "128", "--hw", "h200-sxm", "--window", "4096"]
    assert main([*shape, "--engine", "vllm"]) == 0
    assert '"window": 4096' in capsys.readouterr().out
    assert main(shape) == 2
    assert "not modelled for mpsim's kernels" in capsys.readouterr().err


def test_windowed_decode_accounting_with_sequences_of_different_lengths() -> None:
    """A decode batch's `kv_tokens` (sequences of different lengths): a window reads at most its keys
    a sequence, never more than the batch holds."""
    from traces.accounting import launch_cost
    row = attention_row(4, 1, 8192, 32, 8, 128, 16, kernel="fa3", sms=132, window=1024)
    per_key = launch_cost({**row, "kv_tokens": 4 * 8192}).bytes_read
    short = launch_cost({**row, "kv_tokens": 2048}).bytes_read   # 4 sequences, 512 keys each
    assert launch_cost(row).bytes_read == per_key                # 4 x 1024 window keys either way
    assert short < per_key and short == pytest.approx(per_key / 2, rel=0.01)
