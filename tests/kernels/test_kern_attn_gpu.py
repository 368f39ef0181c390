"""Attention, KV-quantization and small-op kernels compiled for a real GPU at real shapes (32 heads,
head_dim 128, KV 4096); skipped without CUDA.

Exact parts (KV codes, scales, zeros, dequantized rows, argmax, gather) against the numpy references
on the CPU; float outputs against the float64 models within reference/tolerance.py's bounds with
U32_TRUNC (tensor-core accumulators may truncate). Decode runs twice: the split-KV reduction must
give identical bits whatever order the programs arrive in.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mpsim.kernels.attention_decode import attention_decode
from mpsim.kernels.attention_prefill import attention_prefill
from mpsim.kernels.kv_cache import KVCache
from mpsim.kernels.kv_quant import kv_dequant, kv_quant
from mpsim.kernels.launch_config import attention_decode_config, cdiv, decode_split_tokens
from mpsim.kernels.norms import rms_norm
from mpsim.kernels.rope import RopeTable, rope
from mpsim.kernels.sampling import argmax
from mpsim.reference import exact
from mpsim.reference.kv_quant import kv_dequant_ref, kv_quant_ref
from mpsim.reference.sampling import argmax_ref
from mpsim.reference.tolerance import (
    U32_TRUNC,
    assert_close_bound,
    attention_bound,
    rms_norm_bound,
    rope_bound,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

H, D, KV = 32, 128, 4096


def bits16(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


CacheSet = tuple[KVCache, KVCache, torch.Tensor | None, np.ndarray, np.ndarray]


def fill(b: int, hkv: int, lens: list[int], bits: int, paged: bool,
         gen: torch.Generator) -> CacheSet:
    """Caches written by kv_quant from random rows; returns the rows too (CPU numpy)."""
    dev = torch.device("cuda")
    t = max(lens)
    k = torch.randn(b, t, hkv, D, generator=gen, device=dev).half()
    v = torch.randn(b, t, hkv, D, generator=gen, device=dev).half()
    if paged:
        per = cdiv(t, 64)
        perm = torch.randperm(b * per, generator=gen, device=dev).int()
        table: torch.Tensor | None = perm.view(b, per)
        kc = KVCache.empty(b * per, hkv, 64, D, bits, paged=True, device=dev)
        vc = KVCache.empty(b * per, hkv, 64, D, bits, paged=True, device=dev)
    else:
        table = None
        kc, vc = (KVCache.empty(b, hkv, t, D, bits, device=dev) for _ in range(2))
    lens_t = torch.tensor(lens, dtype=torch.int32, device=dev)
    kv_quant(k, v, kc, vc, torch.zeros(b, dtype=torch.int32, device=dev), new_lens=lens_t,
             block_table=table)
    return kc, vc, table, k.cpu().numpy(), v.cpu().numpy()


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("paged", [False, True])
def test_kv_quant_and_dequant_exact_at_real_shapes(bits: int, paged: bool) -> None:
    gen = torch.Generator(device="cuda").manual_seed(bits)
    lens = [512, 300]
    kc, _, table, k_rows, _ = fill(2, H, lens, bits, paged, gen)
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    got = kv_dequant(kc, lens_t, 512, block_table=table).cpu().numpy()
    for b, n in enumerate(lens):
        codes, scale, zero = kv_quant_ref(k_rows[b, :n], bits)  # (n, H, ...)
        want = kv_dequant_ref(codes, scale, zero, bits, D).transpose(1, 0, 2)
        assert np.array_equal(bits16(got[b, :, :n]), bits16(want))
        pos = np.arange(n)
        if table is None:
            idx, slot = np.full(n, b), pos
        else:
            idx, slot = table[b].cpu().numpy()[pos // 64], pos % 64
        assert np.array_equal(kc.data.cpu().numpy()[idx, :, slot], codes)
        assert kc.scale is not None and kc.zero is not None
        assert np.array_equal(bits16(kc.scale.cpu().numpy()[idx, :, slot]), bits16(scale))
        assert np.array_equal(bits16(kc.zero.cpu().numpy()[idx, :, slot]),
                              bits16(zero + np.float16(0)))


@pytest.mark.parametrize("bits", [16, 8, 4])
@pytest.mark.parametrize("hkv,paged", [(32, False), (8, True)], ids=["mha", "gqa-paged"])
def test_decode_at_kv_4096_bounded_and_deterministic(bits: int, hkv: int, paged: bool) -> None:
    gen = torch.Generator(device="cuda").manual_seed(bits + hkv)
    lens = [KV, 1000]
    kc, vc, table, _, _ = fill(2, hkv, lens, bits, paged, gen)
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn(2, H, D, generator=gen, device="cuda").half()
    out = attention_decode(q, kc, vc, lens_t, max_kv_len=KV, block_table=table)
    again = attention_decode(q, kc, vc, lens_t, max_kv_len=KV, block_table=table)
    assert torch.equal(out.view(torch.int16), again.view(torch.int16)), "reduction order leaked"
    k_hat = kv_dequant(kc, lens_t, KV, block_table=table).cpu().numpy()
    v_hat = kv_dequant(vc, lens_t, KV, block_table=table).cpu().numpy()
    cfg = attention_decode_config(2, H, hkv, D, KV, bits, 64 if paged else None)
    assert cfg.block_n is not None
    rescales = cdiv(decode_split_tokens(KV, cfg), cfg.block_n) + 1
    qn, on = q.cpu().numpy(), out.cpu().numpy()
    group = H // hkv
    for b, n in enumerate(lens):
        k = np.repeat(k_hat[b, :, :n], group, axis=0)
        v = np.repeat(v_hat[b, :, :n], group, axis=0)
        qs, mask = qn[b][:, None, :], np.ones((H, 1, n), dtype=bool)
        sm = 1 / math.sqrt(D)
        want = exact.attention_float64(qs, k, v, sm, mask)[:, 0]
        bound = attention_bound(qs, k, v, sm, mask, group > 1, rescales, U32_TRUNC)[:, 0]
        assert_close_bound(on[b], want, bound, f"decode kv{bits} hkv={hkv} b={b}")


def test_prefill_512_tokens_ragged() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    b, t, hkv = 2, 512, 8
    q = torch.randn(b, t, H, D, generator=gen, device="cuda").half()
    k = torch.randn(b, t, hkv, D, generator=gen, device="cuda").half()
    v = torch.randn(b, t, hkv, D, generator=gen, device="cuda").half()
    lens = [512, 300]
    out = attention_prefill(q, k, v, torch.tensor(lens, dtype=torch.int32, device="cuda"))
    on, qn, kn, vn = (a.cpu().numpy() for a in (out, q, k, v))
    n_tiles = cdiv(t, 64)
    for s, n in enumerate(lens):
        qs = qn[s, :n].transpose(1, 0, 2)
        ks = np.repeat(kn[s, :n].transpose(1, 0, 2), H // hkv, axis=0)
        vs = np.repeat(vn[s, :n].transpose(1, 0, 2), H // hkv, axis=0)
        mask = np.broadcast_to(exact.causal_mask(n, n), (H, n, n))
        sm = 1 / math.sqrt(D)
        want = exact.attention_float64(qs, ks, vs, sm, mask)
        bound = attention_bound(qs, ks, vs, sm, mask, True, n_tiles, U32_TRUNC)
        assert_close_bound(on[s, :n].transpose(1, 0, 2), want, bound, f"prefill b={s}")
        assert not on[s, n:].any()


def test_small_ops_at_7b_shapes() -> None:
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(16, 4096, generator=gen, device="cuda").half()
    w = (torch.rand(4096, generator=gen, device="cuda") + 0.5).half()
    xn, wn = x.cpu().numpy(), w.cpu().numpy()
    assert_close_bound(rms_norm(x, w).cpu().numpy(), exact.rms_norm_float64(xn, wn, 1e-6),
                       rms_norm_bound(xn, wn, 1e-6), "rms_norm 16x4096")
    logits = torch.randn(16, 32000, generator=gen, device="cuda").half()
    assert np.array_equal(argmax(logits).cpu().numpy(), argmax_ref(logits.cpu().numpy()))
    qk = torch.randn(1, 512, H, D, generator=gen, device="cuda").half()
    pos = torch.arange(512, dtype=torch.int32, device="cuda")[None]
    table = RopeTable.build(D, 10000.0, 4096, torch.device("cuda"))
    qo, _ = rope(qk, qk, pos, table)
    from mpsim.opspec import rope_angles

    angles = rope_angles(np.arange(512), D, 10000.0)
    c, s = np.cos(angles.astype(np.float64)), np.sin(angles.astype(np.float64))
    xq = qk[0].cpu().numpy()
    assert_close_bound(qo[0].cpu().numpy(), exact.rope_float64(xq, angles, D),
                       rope_bound(xq, c[:, None, :], s[:, None, :]), "rope 512x32x128")
