"""Builders shared by the attention and KV kernel tests: random K/V, caches (contiguous or paged with a
shuffled block table), the kernels' writes, and the float64 expectation of decode attention within
reference/tolerance.py's attention_bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mpsim.kernels.kv_cache import KVCache
from mpsim.kernels.kv_quant import kv_dequant, kv_quant
from mpsim.kernels.launch_config import LaunchConfig, cdiv, decode_split_tokens
from mpsim.reference.exact import attention_float64
from mpsim.reference.kv_quant import unpack_int4
from mpsim.reference.tolerance import U32, attention_bound, folded_magnitudes

PAGE = 64


@dataclass
class FilledCache:
    """A layer's K and V caches after kv_quant, with the fp16 rows that went in (B, T, H_kv, D)."""

    k: KVCache
    v: KVCache
    k_rows: np.ndarray
    v_rows: np.ndarray
    lens: torch.Tensor
    table: torch.Tensor | None


def rows(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def block_table(rng: np.random.Generator, lens: list[int],
                spare: int = 2) -> tuple[torch.Tensor, int]:
    """A shuffled block table covering each sequence's tokens, and the number of physical blocks."""
    need = [cdiv(n, PAGE) for n in lens]
    total = sum(need) + spare
    perm = rng.permutation(total)
    table = np.zeros((len(lens), max(need)), dtype=np.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[used:used + n]
        used += n
    return torch.from_numpy(table), total


def empty_caches(rng: np.random.Generator, b: int, hkv: int, d: int, k_bits: int, v_bits: int,
                 lens: list[int], paged: bool) -> tuple[KVCache, KVCache, torch.Tensor | None]:
    if paged:
        table, blocks = block_table(rng, lens)
        return (KVCache.empty(blocks, hkv, PAGE, d, k_bits, paged=True),
                KVCache.empty(blocks, hkv, PAGE, d, v_bits, paged=True), table)
    t_max = max(lens) + 3
    return KVCache.empty(b, hkv, t_max, d, k_bits), KVCache.empty(b, hkv, t_max, d, v_bits), None


def filled_cache(seed: int, lens: list[int], hkv: int, d: int, k_bits: int, v_bits: int,
                 paged: bool) -> FilledCache:
    """Caches holding tokens 0..lens[b]-1, written by one kv_quant launch of right-padded rows."""
    rng = np.random.default_rng(seed)
    b, t = len(lens), max(lens)
    k_rows, v_rows = rows(rng, (b, t, hkv, d)), rows(rng, (b, t, hkv, d), 2.0)
    kc, vc, table = empty_caches(rng, b, hkv, d, k_bits, v_bits, lens, paged)
    lens_t = torch.tensor(lens, dtype=torch.int32)
    kv_quant(torch.from_numpy(k_rows), torch.from_numpy(v_rows), kc, vc,
             torch.zeros(b, dtype=torch.int32), new_lens=lens_t, block_table=table)
    return FilledCache(kc, vc, k_rows, v_rows, lens_t, table)


def dequantized(fc: FilledCache) -> tuple[np.ndarray, np.ndarray]:
    """(K_hat, V_hat) fp16 (B, H_kv, T, D) as the kernels read them (bit-exact: test_kern_attn_kv)."""
    t = int(fc.lens.max())
    k = kv_dequant(fc.k, fc.lens, t, block_table=fc.table).numpy()
    v = kv_dequant(fc.v, fc.lens, t, block_table=fc.table).numpy()
    return k, v


def decode_rescales(cfg: LaunchConfig, max_kv_len: int) -> int:
    """Online-softmax rescalings a running sum may see: one per tile of a split, plus the merge."""
    assert cfg.block_n is not None
    return cdiv(decode_split_tokens(max_kv_len, cfg), cfg.block_n) + 1


Parts = tuple[np.ndarray, np.ndarray, np.ndarray]  # codes, scale, zero


def contiguous_arrays(fc: FilledCache, which: str) -> tuple[np.ndarray, ...]:
    """The cache as the references take it: contiguous (B, H, T, ...) data (, scale, zero)."""
    cache = fc.k if which == "k" else fc.v
    t = int(fc.lens.max())
    arrays = [cache.data] if cache.scale is None else [cache.data, cache.scale, cache.zero]
    if fc.table is None:
        return tuple(a.numpy()[:, :, :t] for a in arrays if a is not None)
    pos = np.arange(t)
    idx = fc.table.numpy()[:, pos // 64]  # (B, T)
    return tuple(np.moveaxis(a.numpy()[idx, :, pos % 64], 2, 1) for a in arrays if a is not None)


def code_parts(fc: FilledCache, which: str) -> Parts | None:
    """(codes, scale, zero) as float64 (B, H, T, D) / (B, H, T) of a quantized cache; None if fp16."""
    cache = fc.k if which == "k" else fc.v
    if cache.bits == 16:
        return None
    data, scale, zero = contiguous_arrays(fc, which)
    codes = unpack_int4(data) if cache.bits == 4 else data
    return codes.astype(np.float64), scale.astype(np.float64), zero.astype(np.float64)


def folded_kv(fc: FilledCache) -> tuple[np.ndarray, np.ndarray, Parts | None, Parts | None]:
    """K and V as the folded decode computes with them: c s + z exactly (float64), fp16 as is."""
    k_hat, v_hat = dequantized(fc)
    kp, vp = code_parts(fc, "k"), code_parts(fc, "v")
    k = k_hat if kp is None else kp[0] * kp[1][..., None] + kp[2][..., None]
    v = v_hat if vp is None else vp[0] * vp[1][..., None] + vp[2][..., None]
    return k, v, kp, vp


def _rows(parts: Parts | None, s: int, n: int,
          group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    if parts is None:
        return None
    c, sc, z = parts
    return (np.repeat(c[s, :, :n], group, axis=0), np.repeat(sc[s, :, :n], group, axis=0),
            np.repeat(z[s, :, :n], group, axis=0))


def decode_expectation(q: np.ndarray, k_hat: np.ndarray, v_hat: np.ndarray, lens: list[int],
                       sm_scale: float, p_fp16: bool, n_rescales: int,
                       u: float = U32, k_parts: Parts | None = None,
                       v_parts: Parts | None = None) -> tuple[np.ndarray, np.ndarray]:
    """float64 attention of q (B, H_q, D) over K_hat/V_hat (B, H_kv, T, D), and its bound; with
    k_parts/v_parts (code_parts) the bound of the folded sums (kernels/kv_fold.py)."""
    b, hq, d = q.shape
    group = hq // k_hat.shape[1]
    exact = np.zeros((b, hq, d))
    bound = np.zeros((b, hq, d))
    folded = k_parts is not None or v_parts is not None
    for s in range(b):
        n = lens[s]
        k = np.repeat(k_hat[s, :, :n], group, axis=0)
        v = np.repeat(v_hat[s, :, :n], group, axis=0)
        qs = q[s][:, None, :]
        mask = np.ones((hq, 1, n), dtype=bool)
        mags = folded_magnitudes(qs, _rows(k_parts, s, n, group),
                                 _rows(v_parts, s, n, group)) if folded else None
        exact[s] = attention_float64(qs, k, v, sm_scale, mask)[:, 0]
        bound[s] = attention_bound(qs, k, v, sm_scale, mask, p_fp16, n_rescales, u, mags)[:, 0]
    return exact, bound
