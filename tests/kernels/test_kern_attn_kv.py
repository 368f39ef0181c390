"""KV-cache quantization kernel (interpreter on CPU): codes, scales, zeros and dequantized rows equal
reference/kv_quant.py bit for bit, in contiguous and paged caches, at awkward token counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kern_attn_cases import PAGE, FilledCache, empty_caches, filled_cache, rows

from mpsim.kernels.kv_cache import KVCache
from mpsim.kernels.kv_quant import kv_dequant, kv_quant
from mpsim.kernels.launch_config import kv_quant_config
from mpsim.reference.kv_quant import kv_dequant_ref, kv_quant_ref
from mpsim.traces.recorder import Recorder


def cache_slots(table: torch.Tensor | None, b: int, positions: np.ndarray) -> tuple[np.ndarray, ...]:
    """(first-axis indices, slots) of sequence b's tokens, as docs/formats.md lays the cache out."""
    if table is None:
        return np.full_like(positions, b), positions
    return table[b].numpy()[positions // PAGE], positions % PAGE


def bits16(a: np.ndarray | torch.Tensor) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def assert_cache_matches_reference(cache: KVCache, table: torch.Tensor | None, x: np.ndarray,
                                   lens: list[int], start: list[int]) -> None:
    """Every written (token, head) row holds kv_quant_ref's codes, scale and zero (fp16: the row)."""
    for b, n in enumerate(lens):
        idx, slot = cache_slots(table, b, start[b] + np.arange(n))
        got = cache.data.numpy()[idx, :, slot]  # (n, H, D_bytes)
        if cache.bits == 16:
            assert np.array_equal(bits16(got), bits16(x[b, :n])), b
            continue
        codes, scale, zero = kv_quant_ref(x[b, :n], cache.bits)
        assert cache.scale is not None and cache.zero is not None
        assert np.array_equal(got, codes), b
        assert np.array_equal(bits16(cache.scale.numpy()[idx, :, slot]), bits16(scale)), b
        assert np.array_equal(bits16(cache.zero.numpy()[idx, :, slot]), bits16(zero)), b


def assert_dequant_matches_reference(fc: FilledCache, which: str) -> None:
    cache, x = (fc.k, fc.k_rows) if which == "k" else (fc.v, fc.v_rows)
    lens = fc.lens.tolist()
    got = kv_dequant(cache, fc.lens, max(lens), block_table=fc.table).numpy()
    for b, n in enumerate(lens):
        rows_bt = x[b, :n]  # (n, H, D)
        if cache.bits == 16:
            want = rows_bt
        else:
            want = kv_dequant_ref(*kv_quant_ref(rows_bt, cache.bits), cache.bits, cache.head_dim)
        assert np.array_equal(got[b, :, :n].view(np.uint16),
                              want.transpose(1, 0, 2).view(np.uint16)), (which, b)
        assert not got[b, :, n:].any(), "rows past the length must read as 0"


@pytest.mark.parametrize("bits", [8, 4, 16])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("lens,d", [([1, 7], 64), ([33, 129], 80)])
def test_kv_quant_matches_reference_bit_for_bit(bits: int, paged: bool, lens: list[int],
                                                d: int) -> None:
    fc = filled_cache(seed=bits + d, lens=lens, hkv=2, d=d, k_bits=bits, v_bits=bits,
                      paged=paged)
    zeros = [0] * len(lens)
    assert_cache_matches_reference(fc.k, fc.table, fc.k_rows, lens, zeros)
    assert_cache_matches_reference(fc.v, fc.table, fc.v_rows, lens, zeros)
    assert_dequant_matches_reference(fc, "k")
    assert_dequant_matches_reference(fc, "v")


def test_decode_step_appends_at_each_sequences_position_across_a_page_edge() -> None:
    rng = np.random.default_rng(3)
    lens_after = [64, 70, 1]
    kc, vc, table = empty_caches(rng, 3, 2, 64, 4, 8, lens_after, paged=True)
    start = [63, 69, 0]
    k1, v1 = rows(rng, (3, 1, 2, 64)), rows(rng, (3, 1, 2, 64))
    kv_quant(torch.from_numpy(k1), torch.from_numpy(v1), kc, vc,
             torch.tensor(start, dtype=torch.int32), block_table=table)
    assert_cache_matches_reference(kc, table, k1, [1, 1, 1], start)
    assert_cache_matches_reference(vc, table, v1, [1, 1, 1], start)
    written = {tuple(int(a[0]) for a in cache_slots(table, b, np.array([s])))
               for b, s in enumerate(start)}
    scale = kc.scale
    assert scale is not None
    untouched = [(i, s) for i in range(scale.shape[0]) for s in range(PAGE) if (i, s) not in written]
    assert all(not scale[i, :, s].any() for i, s in untouched), "only the new slots are written"


def test_mixed_bits_fp16_keys_int4_values() -> None:
    fc = filled_cache(seed=5, lens=[7, 3], hkv=1, d=64, k_bits=16, v_bits=4, paged=False)
    assert_cache_matches_reference(fc.k, None, fc.k_rows, [7, 3], [0, 0])
    assert_cache_matches_reference(fc.v, None, fc.v_rows, [7, 3], [0, 0])


@settings(max_examples=12, deadline=None)
@given(bits=st.sampled_from((8, 4)), d=st.sampled_from((2, 8, 80)),
       values=st.lists(st.floats(-60000, 60000, width=16), min_size=1, max_size=4))
def test_edge_rows_constant_huge_and_tiny(bits: int, d: int, values: list[float]) -> None:
    """Rows built from few distinct values: constant rows (scale 0), +-60000 spans, subnormals."""
    rng = np.random.default_rng(d)
    x = np.asarray(values, dtype=np.float16)[rng.integers(0, len(values), (1, 2, 1, d))]
    kc, vc, _ = empty_caches(rng, 1, 1, d, bits, bits, [2], paged=False)
    xt = torch.from_numpy(x)
    kv_quant(xt, xt, kc, vc, torch.zeros(1, dtype=torch.int32))
    assert_cache_matches_reference(kc, None, x, [2], [0])


def test_recorded_launch_carries_the_kv_quant_row() -> None:
    rng = np.random.default_rng(0)
    kc, vc, _ = empty_caches(rng, 2, 2, 64, 8, 8, [7, 7], paged=False)
    x = torch.from_numpy(rows(rng, (2, 7, 2, 64)))
    with Recorder() as rec:
        kv_quant(x, x, kc, vc, torch.zeros(2, dtype=torch.int32))
    (row,) = rec.finish()
    cfg = kv_quant_config(14, 2, 64, 8, on_gpu=False)
    assert (row["kernel"], row["op"]) == ("kv_quant_kernel", "kv_quant")
    assert json.loads(row["grid"]) == list(cfg.grid) and json.loads(row["config"]) == cfg.config_dict()
    assert (row["batch"], row["q_len"], row["num_kv_heads"], row["head_dim"]) == (2, 7, 2, 64)
    assert (row["k_bits"], row["v_bits"], row["kv_block"]) == (8, 8, None)
    assert row["bytes_written"] == 2 * 7 * 2 * 2 * (64 + 4)


def test_errors_name_the_argument() -> None:
    rng = np.random.default_rng(0)
    kc, vc, table = empty_caches(rng, 1, 2, 64, 8, 8, [7], paged=True)
    x = torch.from_numpy(rows(rng, (1, 7, 2, 64)))
    start = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="block_table: a paged cache needs"):
        kv_quant(x, x, kc, vc, start)
    with pytest.raises(ValueError, match="k_new: expected dtype fp16, got fp32"):
        kv_quant(x.float(), x, kc, vc, start, block_table=table)
    with pytest.raises(ValueError, match="start_pos: expected dtype int32"):
        kv_quant(x, x, kc, vc, start.long(), block_table=table)
    wide = torch.zeros(1, 7, 2, 80, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"k_new: expected size 64 on axis 3 .*\(1, 7, 2, 80\)"):
        kv_quant(wide, x, kc, vc, start, block_table=table)
    with pytest.raises(ValueError, match=r"start_pos: writes must land in positions \[0, 64\)"):
        kv_quant(x, x, kc, vc, torch.tensor([60], dtype=torch.int32), block_table=table)
    with pytest.raises(ValueError, match="bits=3: expected one of"):
        KVCache.empty(1, 2, 64, 64, 3)
    with pytest.raises(ValueError, match="int4 KV needs an even head_dim"):
        KVCache(torch.zeros(1, 1, 4, 3, dtype=torch.uint8), None, None, 4, 7)
