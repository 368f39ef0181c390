"""Decode attention kernel (interpreter on CPU): fp16/int8/int4 KV, contiguous and paged caches, MHA
and GQA, ragged KV lengths that are not multiples of the tile, split-KV with the in-launch reduction.

Outputs are checked against the float64 attention over the cache's values (fp16 K/V as stored; int8/int4
K/V as c s + z exactly, the values the folded sums of kernels/kv_fold.py compute with; the dequantized
fp16 values are bit-exact with reference/kv_quant.py, tests/kernels/test_kern_attn_kv.py) within
reference/tolerance.py's attention_bound, and against the numba twin (reference/attention_decode.py,
or reference/attention_folded.py for quantized K/V) within the sum of the two implementations' bounds.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kern_attn_cases import (
    FilledCache,
    contiguous_arrays,
    decode_expectation,
    decode_rescales,
    filled_cache,
    folded_kv,
    rows,
)

from mpsim.kernels.attention_decode import WORKSPACES, attention_decode
from mpsim.kernels.launch_config import (
    attention_decode_config,
    decode_group_block,
    decode_split_tokens,
)
from mpsim.reference.attention_decode import attention_decode_ref
from mpsim.reference.attention_folded import attention_decode_folded_ref
from mpsim.reference.tolerance import assert_close_bound
from mpsim.traces.recorder import Recorder

CASES = [  # (lens, H_q, H_kv, D, bits, paged)
    ([1, 33], 2, 2, 64, 16, False),
    ([129, 7], 2, 2, 64, 8, False),
    ([33, 129], 2, 2, 80, 4, False),
    ([129, 70], 4, 2, 80, 8, True),   # GQA (tl.dot path), paged, a page edge inside the split
    ([7, 1, 65], 3, 1, 64, 4, True),  # GQA group of 3 padded to 16 rows, three sequences
    ([64, 100], 2, 2, 64, 16, True),
]


def reference_output(q: np.ndarray, fc: FilledCache) -> np.ndarray:
    """reference/attention_decode.py (fp16 K/V) or its folded twin (int8/int4 K and V)."""
    k, v = contiguous_arrays(fc, "k"), contiguous_arrays(fc, "v")
    if fc.k.bits < 16 and fc.v.bits < 16:
        return attention_decode_folded_ref(q, k[0], v[0], fc.lens.numpy(), fc.k.bits, fc.v.bits,
                                           k[1], k[2], v[1], v[2])
    assert fc.k.bits == fc.v.bits == 16, "mixed fp16/quantized K and V: no twin here"
    return attention_decode_ref(q, k[0], v[0], fc.lens.numpy(), 16, 16)


@pytest.mark.parametrize("lens,hq,hkv,d,bits,paged", CASES)
def test_decode_within_the_attention_bound(lens: list[int], hq: int, hkv: int, d: int,
                                           bits: int, paged: bool) -> None:
    fc = filled_cache(seed=len(lens) * 100 + d + bits, lens=lens, hkv=hkv, d=d, k_bits=bits,
                      v_bits=bits, paged=paged)
    q = rows(np.random.default_rng(hq), (len(lens), hq, d), 2.0)
    out = attention_decode(torch.from_numpy(q), fc.k, fc.v, fc.lens, max_kv_len=max(lens),
                           block_table=fc.table).numpy()
    cfg = attention_decode_config(len(lens), hq, hkv, d, max(lens), bits, fc.k.kv_block,
                                  on_gpu=False)
    k_x, v_x, kp, vp = folded_kv(fc)
    p_fp16 = decode_group_block(hq, hkv) > 1  # the tl.dot path rounds P (or P s) to fp16
    sm_scale = 1.0 / math.sqrt(d)
    exact, bound = decode_expectation(q, k_x, v_x, lens, sm_scale, p_fp16,
                                      decode_rescales(cfg, max(lens)), k_parts=kp, v_parts=vp)
    assert_close_bound(out, exact, bound, f"decode {lens} {bits}-bit")
    # The numba twin (the same folded order, two passes) is within its own bound of the same model.
    _, ref_bound = decode_expectation(q, k_x, v_x, lens, sm_scale, False, 0, k_parts=kp,
                                      v_parts=vp)
    assert_close_bound(out, reference_output(q, fc), bound + ref_bound, "decode vs reference")


def test_splits_reduce_deterministically_and_reset_their_counters() -> None:
    lens = [129, 40]
    fc = filled_cache(seed=9, lens=lens, hkv=2, d=64, k_bits=8, v_bits=8, paged=False)
    cfg = attention_decode_config(2, 2, 2, 64, 129, 8, None, on_gpu=False)
    assert cfg.split_k > 1, "this test needs the split-KV path"
    q = torch.from_numpy(rows(np.random.default_rng(1), (2, 2, 64)))
    first = attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=129)
    _, _, counters, _ = WORKSPACES.get(q.device, 2, 2, 1, 64, cfg.split_k)
    assert not counters.any(), "the last program of each (sequence, head) resets its counter"
    again = attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=129)
    assert torch.equal(first.view(torch.int16), again.view(torch.int16))


def test_max_kv_len_above_the_longest_sequence_leaves_empty_splits() -> None:
    """A host bound larger than every length: trailing splits see no key and must not poison."""
    lens = [9, 20]
    fc = filled_cache(seed=4, lens=lens, hkv=1, d=64, k_bits=4, v_bits=4, paged=False)
    q = torch.from_numpy(rows(np.random.default_rng(2), (2, 1, 64)))
    out = attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=22).numpy()
    tight = attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=20).numpy()
    k_x, v_x, kp, vp = folded_kv(fc)
    cfg = attention_decode_config(2, 1, 1, 64, 22, 4, None, on_gpu=False)
    exact, bound = decode_expectation(q.numpy(), k_x, v_x, lens, 1 / 8, False,
                                      decode_rescales(cfg, 22), k_parts=kp, v_parts=vp)
    assert_close_bound(out, exact, bound, "max_kv_len > lens")
    assert_close_bound(tight, exact, bound, "max_kv_len == max(lens)")


def test_recorded_launch_carries_the_attention_row() -> None:
    fc = filled_cache(seed=2, lens=[33, 5], hkv=2, d=64, k_bits=4, v_bits=4, paged=True)
    q = torch.from_numpy(rows(np.random.default_rng(3), (2, 4, 64)))
    with Recorder() as rec:
        attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=33, block_table=fc.table)
    (row,) = rec.finish()
    cfg = attention_decode_config(2, 4, 2, 64, 33, 4, 64, on_gpu=False)
    assert (row["kernel"], row["op"], row["q_len"], row["kv_len"]) == ("attention_decode_kernel",
                                                           "attention", 1, 33)
    assert (row["num_q_heads"], row["num_kv_heads"], row["k_bits"], row["kv_block"]) == (4, 2, 4, 64)
    assert row["causal"], "decode rows say causal (the query is the last position), as synthesis does"
    assert json.loads(row["grid"]) == list(cfg.grid) and json.loads(row["config"]) == cfg.config_dict()
    assert row["bytes_read"] > 2 * 2 * 33 * (32 + 4)  # K and V codes plus scale/zero pairs


def test_errors_name_the_argument() -> None:
    fc = filled_cache(seed=1, lens=[7], hkv=2, d=64, k_bits=8, v_bits=8, paged=False)
    q = torch.from_numpy(rows(np.random.default_rng(0), (1, 3, 64)))
    with pytest.raises(ValueError, match="q: expected a multiple of the cache's 2 KV heads"):
        attention_decode(q, fc.k, fc.v, fc.lens, max_kv_len=7)
    q2 = q[:, :2].contiguous()
    with pytest.raises(ValueError, match="max_kv_len=11: the cache holds at most 10"):
        attention_decode(q2, fc.k, fc.v, fc.lens, max_kv_len=11)
    with pytest.raises(ValueError, match="kv_lens: expected dtype int32"):
        attention_decode(q2, fc.k, fc.v, fc.lens.long(), max_kv_len=7)
    with pytest.raises(ValueError, match="block_table: given for a contiguous cache"):
        attention_decode(q2, fc.k, fc.v, fc.lens, max_kv_len=7,
                         block_table=torch.zeros(1, 1, dtype=torch.int32))
    odd = filled_cache(seed=1, lens=[7], hkv=2, d=36, k_bits=4, v_bits=4, paged=False)
    with pytest.raises(ValueError, match="k_cache: 4-bit KV decode reads whole 32-bit words"):
        attention_decode(torch.zeros(1, 2, 36, dtype=torch.float16), odd.k, odd.v, odd.lens,
                         max_kv_len=7)


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 64), hkv=st.sampled_from((1, 2, 8, 32)), group=st.sampled_from((1, 4, 6)),
       kv=st.integers(1, 40000), on_gpu=st.booleans())
def test_decode_splits_cover_the_keys_without_an_empty_tail(batch: int, hkv: int, group: int,
                                                            kv: int, on_gpu: bool) -> None:
    cfg = attention_decode_config(batch, hkv * group, hkv, 128, kv, 8, None, on_gpu=on_gpu)
    per = decode_split_tokens(kv, cfg)
    assert cfg.grid == (batch, hkv, cfg.split_k) and per % (cfg.block_n or 0) == 0
    assert (cfg.split_k - 1) * per < kv <= cfg.split_k * per
    assert cfg.block_m == (1 if group == 1 else 16)


def test_gpu_decode_config_at_vicuna_shapes() -> None:
    one = attention_decode_config(1, 32, 32, 128, 8192, 4, None)
    many = attention_decode_config(16, 32, 32, 128, 8192, 4, None)
    assert (one.split_k, decode_split_tokens(8192, one)) == (16, 512)
    assert many.split_k == 2 and many.programs >= 528
