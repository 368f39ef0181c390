"""Decode attention over an fp8 e4m3 KV cache (`+kv8f`) under the interpreter: the cache writer's codes
bit for bit reference/attention_fp8kv.py's kv_fp8_quant_ref (hence reference/fp8.py's satfinite
encoder), and decode (MHA and GQA, contiguous and paged, ragged lengths, split KV) within
reference/tolerance.py's attention_bound of the float64 attention over the cache's values e4m3(c) s,
as is the numba twin. The kernel's extra roundings (the per-head scales folded into the score scale
and into each split's accumulator) are inside the bound's folded-V allowance (two more roundings per
term, V's magnitudes as the folded magnitudes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kern_attn_cases import block_table, decode_expectation, decode_rescales

from mpsim.kernels.attention_decode_fp8 import attention_decode_fp8, kv_fp8_quant
from mpsim.kernels.launch_config import attention_decode_config
from mpsim.reference.attention_fp8kv import attention_decode_fp8_ref, kv_fp8_quant_ref
from mpsim.reference.fp8 import decode_e4m3
from mpsim.reference.tolerance import assert_close_bound
from mpsim.traces.recorder import Recorder

PAGE = 64


def test_kv_fp8_quant_bit_exact() -> None:
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((37, 3, 80)) * np.array([1.0, 200.0, 1e-3])[None, :, None]).astype(np.float16)
    x[0, 0, :3] = [-0.0, 65504, -65504]  # -0 keeps its sign; both extremes saturate to +-448
    scales = np.array([0.01, 0.5, 3e-6], np.float32)
    codes = kv_fp8_quant(torch.from_numpy(x), torch.from_numpy(scales)).numpy()
    np.testing.assert_array_equal(codes, kv_fp8_quant_ref(x, scales))
    assert codes[0, 0, 0] == 0x80 and codes[0, 0, 1] == 0x7E and codes[0, 0, 2] == 0xFE


def _cache(rng: np.random.Generator, b: int, hkv: int, d: int, lens: list[int], per_head: bool, paged: bool):
    t_max = max(lens)
    k = (rng.standard_normal((b, hkv, t_max, d)) * 2).astype(np.float16)
    v = rng.standard_normal((b, hkv, t_max, d)).astype(np.float16)
    ks = (np.abs(k).max(axis=(0, 2, 3)) / 448).astype(np.float32)
    vs = (np.abs(v).max(axis=(0, 2, 3)) / 448).astype(np.float32)
    if not per_head:
        ks[:], vs[:] = ks.max(), vs.max()
    kc = kv_fp8_quant_ref(k.transpose(0, 2, 1, 3), ks).transpose(0, 2, 1, 3).copy()
    vc = kv_fp8_quant_ref(v.transpose(0, 2, 1, 3), vs).transpose(0, 2, 1, 3).copy()
    table = None
    kd, vd = torch.from_numpy(kc), torch.from_numpy(vc)
    if paged:
        table, blocks = block_table(rng, lens)
        kd = torch.zeros((blocks, hkv, PAGE, d), dtype=torch.uint8)
        vd = torch.zeros_like(kd)
        for s, n in enumerate(lens):
            for t in range(n):
                blk = int(table[s, t // PAGE])
                kd[blk, :, t % PAGE] = torch.from_numpy(kc[s, :, t])
                vd[blk, :, t % PAGE] = torch.from_numpy(vc[s, :, t])
    return kc, vc, ks, vs, kd, vd, table


@pytest.mark.parametrize(("hq", "hkv", "per_head", "paged"),
                         [(4, 4, True, False), (4, 4, False, True), (8, 2, True, True), (6, 3, False, False)])
def test_decode_fp8_within_bound(hq: int, hkv: int, per_head: bool, paged: bool) -> None:
    rng = np.random.default_rng(hq * 10 + hkv)
    b, d = 3, 80
    lens = [1, 70, 45]
    kc, vc, ks, vs, kd, vd, table = _cache(rng, b, hkv, d, lens, per_head, paged)
    q = rng.standard_normal((b, hq, d)).astype(np.float16)
    sm = 1 / np.sqrt(d)
    out = attention_decode_fp8(torch.from_numpy(q), kd, vd, torch.from_numpy(ks), torch.from_numpy(vs),
                               torch.tensor(lens, dtype=torch.int32), max_kv_len=max(lens),
                               block_table=table).numpy()
    k_hat = decode_e4m3(kc).astype(np.float64) * ks[None, :, None, None]
    v_hat = decode_e4m3(vc).astype(np.float64) * vs[None, :, None, None]
    cfg = attention_decode_config(b, hq, hkv, d, max(lens), 8, PAGE if paged else None, on_gpu=False)
    assert cfg.split_k > 1
    v_parts = (np.abs(v_hat), np.ones(v_hat.shape[:3]), np.zeros(v_hat.shape[:3]))
    exact, bound = decode_expectation(q, k_hat, v_hat, lens, float(np.float32(sm)), (cfg.block_m or 1) > 1,
                                      decode_rescales(cfg, max(lens)), v_parts=v_parts)
    assert_close_bound(out, exact, bound, f"attention_decode_fp8 hq={hq} hkv={hkv}")
    twin = attention_decode_fp8_ref(q, kc, vc, ks, vs, np.array(lens))
    assert_close_bound(twin, exact, bound, "attention_decode_fp8_ref")
    assert_close_bound(out, twin, 2 * bound, "kernel vs twin")
    wrong = decode_expectation(q, k_hat * 1.001, v_hat, lens, float(np.float32(sm)), (cfg.block_m or 1) > 1,
                               decode_rescales(cfg, max(lens)), v_parts=v_parts)[0]
    assert (np.abs(out - wrong) > bound).any()  # a 0.1% error in the K scale is visible


def test_decode_fp8_records_and_checks() -> None:
    rng = np.random.default_rng(3)
    _, _, ks, vs, kd, vd, _ = _cache(rng, 1, 2, 64, [5], True, False)
    q = torch.from_numpy(rng.standard_normal((1, 2, 64)).astype(np.float16))
    lens = torch.tensor([5], dtype=torch.int32)
    with Recorder() as rec:
        attention_decode_fp8(q, kd, vd, torch.from_numpy(ks), torch.from_numpy(vs), lens, max_kv_len=5)
    (row,) = rec.finish()
    assert (row["kernel"], row["kv_format"], row["k_bits"]) == ("attention_decode_fp8_kernel", "fp8-e4m3", 8)
    with pytest.raises(ValueError, match="k_scales"):
        attention_decode_fp8(q, kd, vd, torch.ones(3), torch.from_numpy(vs), lens, max_kv_len=5)
    with pytest.raises(ValueError, match="max_kv_len"):
        attention_decode_fp8(q, kd, vd, torch.from_numpy(ks), torch.from_numpy(vs), lens, max_kv_len=9)
