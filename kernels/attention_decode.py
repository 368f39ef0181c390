"""Decode attention over an fp16/int8/int4 KV cache: flash-decoding with an in-launch reduction.

One program owns (sequence, KV head, KV split) and all query heads of that KV head (GQA), so each
cached K/V byte is read once. It streams its split in BLOCK_N-token tiles, dequantizing rows with
`load_kv_tile` (codes loaded as uint8, scale/zero once per token, int4 nibbles by shift and mask),
and keeps an online softmax (running max m, sum l, accumulator acc in fp32, exp2 with log2(e)
folded into the score scale). With more than one split, each program stores (acc, m, l) in a cached
workspace, a CTA barrier plus one acq_rel atomic publishes them, and the last program to arrive
merges the splits in split order (deterministic whatever the arrival order), writes the output and
resets the counter to 0. Reference twin: reference/attention_decode.py::attention_decode_ref.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from mpsim.kernels import runtime
from mpsim.kernels.kv_cache import (
    KVCache,
    check_kv_pair,
    check_seq_vector,
    check_table_rows,
    slot_args,
)
from mpsim.kernels.kv_fold import (
    folded_scores,
    folded_values,
    kv_code_scale,
    kv_codes,
    kv_scale_zero,
    values_lanes,
)
from mpsim.kernels.kv_quant import cache_rows, load_kv_tile
from mpsim.kernels.launch_checks import check_positive, check_tensor, launch_recorded
from mpsim.kernels.launch_config import (
    LaunchConfig,
    attention_decode_config,
    decode_split_tokens,
)
from mpsim.kernels.runtime import on_gpu
from mpsim.traces.recorder import active_recorder

LOG2E = 1.4426950408889634


@triton.jit
def _scores(q, k, BLOCK_G: tl.constexpr):
    """q (BLOCK_G, D) fp16 . k (BLOCK_N, D) fp16 -> (BLOCK_G, BLOCK_N) fp32."""
    if BLOCK_G == 1:
        s = tl.sum(tl.sum(q, 0).to(tl.float32)[None, :] * k.to(tl.float32), 1)[None, :]
    else:
        s = tl.dot(q, tl.trans(k))
    return s


@triton.jit
def _weighted_values(p, v, BLOCK_G: tl.constexpr):
    """p (BLOCK_G, BLOCK_N) fp32 @ v (BLOCK_N, D) fp16 -> (BLOCK_G, D) fp32 (P in fp16 for tl.dot)."""
    if BLOCK_G == 1:
        pv = tl.sum(tl.sum(p, 0)[:, None] * v.to(tl.float32), 0)[None, :]
    else:
        pv = tl.dot(p.to(tl.float16), v)
    return pv


@triton.jit
def _query_terms(q, K_BITS: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """What the folded scores need of q (kv_fold.folded_scores): one query row widened and times
    2^(24 - k_d) (exact: q_d times the subnormal code is q_d c_d), else q; and sum_d q_d."""
    qsum = tl.sum(q.to(tl.float32), 1)
    if K_BITS < 16 and BLOCK_G == 1:  # noqa: SIM108 (a static branch on constexprs)
        qk = q.to(tl.float32) * kv_code_scale(K_BITS, BLOCK_D)[None, :]
    else:
        qk = q
    return qk, qsum


@triton.jit
def _tile_scores(q, qk, qsum, kd_ptr, ks_ptr, kz_ptr, k_off, sz_off, valid, D, K_BITS: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Unscaled scores (BLOCK_G, BLOCK_N) fp32 of one K tile: fp16 K dequantized, int8/int4 folded."""
    if K_BITS == 16:
        raw = _scores(q, load_kv_tile(kd_ptr, ks_ptr, kz_ptr, k_off, sz_off, valid, D, 16, BLOCK_D),
                      BLOCK_G)
    else:  # codes as fp16 pairs, scale and zero once per token (kv_fold.py)
        ks, kz = kv_scale_zero(ks_ptr, kz_ptr, sz_off, valid)
        kc = kv_codes(kd_ptr, k_off, valid, D, K_BITS, BLOCK_N, BLOCK_D, BLOCK_G == 1)
        raw = folded_scores(qk, qsum, kc, ks, kz, BLOCK_G)
    return raw


@triton.jit
def _tile_values(p, vd_ptr, vs_ptr, vz_ptr, v_off, sz_off, valid, D, V_BITS: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 LANES: tl.constexpr):
    """One V tile's contribution to the accumulator, and to sum p z (LANES: the per-lane terms and
    sum_j p_j z_j apart; otherwise the (BLOCK_G, D) product, 0)."""
    zp = tl.zeros([BLOCK_G], tl.float32)
    if V_BITS == 16:
        pv = _weighted_values(p, load_kv_tile(vd_ptr, vs_ptr, vz_ptr, v_off, sz_off, valid, D, 16,
                                              BLOCK_D), BLOCK_G)
    else:
        vs, vz = kv_scale_zero(vs_ptr, vz_ptr, sz_off, valid)
        vc = kv_codes(vd_ptr, v_off, valid, D, V_BITS, BLOCK_N, BLOCK_D, BLOCK_G == 1)
        if LANES:
            pv, zp = values_lanes(p, vc, vs, vz)
        else:
            pv = folded_values(p, vc, vs, vz)
    return pv, zp


@triton.jit
def _merge_splits(ws_acc, ws_ml, row0, num_splits, g, d,
                  BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """Merge the splits' (acc, m, l) in split order: sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s."""
    m_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
    for s in range(0, num_splits):
        ml = ws_ml + (row0 + s) * 2 * BLOCK_G
        m_max = tl.maximum(m_max, tl.load(ml + g, cache_modifier=".cg"))
    l_tot = tl.zeros([BLOCK_G], tl.float32)
    o_tot = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for s in range(0, num_splits):
        ml = ws_ml + (row0 + s) * 2 * BLOCK_G
        w = tl.exp2(tl.load(ml + g, cache_modifier=".cg") - m_max)
        l_tot += w * tl.load(ml + BLOCK_G + g, cache_modifier=".cg")
        acc = tl.load(ws_acc + (row0 + s) * BLOCK_G * BLOCK_D + g[:, None] * BLOCK_D + d[None, :],
                      cache_modifier=".cg")
        o_tot += w[:, None] * acc
    return o_tot / l_tot[:, None]


@triton.jit
def attention_decode_kernel(
    q_ptr, o_ptr, kd_ptr, ks_ptr, kz_ptr, vd_ptr, vs_ptr, vz_ptr, lens_ptr, table_ptr,
    ws_acc, ws_ml, counters,
    qk_scale, split_len, num_splits, ws_splits, GROUP, D,
    stride_qb, stride_qh, stride_ob, stride_oh,
    stride_kb, stride_kh, stride_kt, stride_vb, stride_vh, stride_vt,
    stride_sb, stride_sh, stride_st, stride_tab,
    K_BITS: tl.constexpr, V_BITS: tl.constexpr, PAGED: tl.constexpr, KV_BLOCK: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, ONE_SPLIT: tl.constexpr,
):
    seq = tl.program_id(0)
    hk = tl.program_id(1)
    sp = tl.program_id(2)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    head = hk * GROUP + g
    gd_mask = (g < GROUP)[:, None] & (d < D)[None, :]
    q = tl.load(q_ptr + seq * stride_qb + head[:, None] * stride_qh + d[None, :], mask=gd_mask,
                other=0.0)
    kv_len = tl.load(lens_ptr + seq)
    lo = sp * split_len
    hi = tl.minimum(lo + split_len, kv_len)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    # One query head over quantized V: one accumulator per (token slot, d) lane, summed over the
    # slots after the loop (kv_fold.values_lanes), not a cross-thread sum over tokens every tile.
    LANES: tl.constexpr = BLOCK_G == 1 and V_BITS < 16
    acc = tl.zeros([BLOCK_N if LANES else BLOCK_G, BLOCK_D], tl.float32)
    zacc = tl.zeros([BLOCK_G], tl.float32)
    qk, qsum = _query_terms(q, K_BITS, BLOCK_G, BLOCK_D)
    for start in range(lo, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        valid = offs_n < hi
        outer, slot = cache_rows(seq, tl.where(valid, offs_n, 0), table_ptr, stride_tab, PAGED,
                                 KV_BLOCK)
        sz_off = outer * stride_sb + hk * stride_sh + slot * stride_st
        raw = _tile_scores(q, qk, qsum, kd_ptr, ks_ptr, kz_ptr,
                           outer * stride_kb + hk * stride_kh + slot * stride_kt, sz_off, valid, D,
                           K_BITS, BLOCK_G, BLOCK_N, BLOCK_D)
        s = tl.where(valid[None, :], raw * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        pv, zp = _tile_values(p, vd_ptr, vs_ptr, vz_ptr,
                              outer * stride_vb + hk * stride_vh + slot * stride_vt, sz_off, valid,
                              D, V_BITS, BLOCK_G, BLOCK_N, BLOCK_D, LANES)
        zacc = zacc * alpha + zp
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    if LANES:  # the lanes' sums times 2^-k_d (exact), plus sum p z
        acc = tl.sum(acc, 0)[None, :] * (kv_code_scale(V_BITS, BLOCK_D) * (1.0 / 16777216.0))[None, :] \
            + zacc[:, None]
    o_ptrs = o_ptr + seq * stride_ob + head[:, None] * stride_oh + d[None, :]
    _finish(acc, m_i, l_i, o_ptrs, gd_mask, ws_acc, ws_ml, counters, seq, hk, sp, num_splits,
            ws_splits, g, d, BLOCK_G, BLOCK_D, ONE_SPLIT)


@triton.jit
def _finish(acc, m_i, l_i, o_ptrs, gd_mask, ws_acc, ws_ml, counters, seq, hk, sp, num_splits,
            ws_splits, g, d, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
            ONE_SPLIT: tl.constexpr):
    """Store the output (one split), or publish this split's (acc, m, l) and, the last to arrive,
    merge all splits in split order and reset the counter."""
    if ONE_SPLIT:
        tl.store(o_ptrs, (acc / l_i[:, None]).to(tl.float16), mask=gd_mask)
    else:
        row0 = (seq * tl.num_programs(1) + hk) * ws_splits
        tl.store(ws_acc + (row0 + sp) * BLOCK_G * BLOCK_D + g[:, None] * BLOCK_D + d[None, :], acc)
        tl.store(ws_ml + (row0 + sp) * 2 * BLOCK_G + g, m_i)
        tl.store(ws_ml + (row0 + sp) * 2 * BLOCK_G + BLOCK_G + g, l_i)
        # All threads' stores happen before the one thread's release; the acquire side plus .cg
        # loads make the other programs' partials visible to the last arriver.
        tl.debug_barrier()
        counter = counters + seq * tl.num_programs(1) + hk
        if tl.atomic_add(counter, 1, sem="acq_rel") == num_splits - 1:
            out = _merge_splits(ws_acc, ws_ml, row0, num_splits, g, d, BLOCK_G, BLOCK_D)
            tl.store(o_ptrs, out.to(tl.float16), mask=gd_mask)
            tl.atomic_xchg(counter, 0)


class DecodeWorkspaces:
    """Per (device, batch, KV heads, BLOCK_G, BLOCK_D): fp32 partials, (m, l) pairs, zeroed counters.

    Grown (never shrunk) to the largest split count seen, the capacity being the workspace's split
    stride, so a KV length that grows step by step allocates a handful of times, not every step.
    Kernels of one stream run in order, so one cache per process is enough.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int, int, int, int], tuple[torch.Tensor, ...]] = {}

    def get(self, device: torch.device, batch: int, heads: int, block_g: int, block_d: int,
            splits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        key = (str(device), batch, heads, block_g, block_d)
        cached = self._cache.get(key)
        if cached is None or cached[0].shape[2] < splits:
            acc = torch.empty((batch, heads, splits, block_g, block_d), dtype=torch.float32,
                              device=device)
            ml = torch.empty((batch, heads, splits, 2, block_g), dtype=torch.float32,
                             device=device)
            counters = torch.zeros(batch * heads, dtype=torch.int32, device=device)
            cached = self._cache[key] = (acc, ml, counters)
        return cached[0], cached[1], cached[2], int(cached[0].shape[2])

    def discard(self, device: torch.device, batch: int, heads: int, block_g: int,
                block_d: int) -> None:
        """Forget a workspace whose counters a failed launch may have left non-zero."""
        self._cache.pop((str(device), batch, heads, block_g, block_d), None)


WORKSPACES = DecodeWorkspaces()


def _check_decode_args(q: torch.Tensor, k_cache: KVCache, v_cache: KVCache,
                       kv_lens: torch.Tensor, max_kv_len: int,
                       block_table: torch.Tensor | None) -> None:
    check_kv_pair(k_cache, v_cache, block_table)
    dev = k_cache.data.device
    check_tensor("q", q, (torch.float16,), 3, (None, None, k_cache.head_dim), dev)
    b, hq = int(q.shape[0]), int(q.shape[1])
    if hq % k_cache.num_kv_heads:
        raise ValueError(f"q: expected a multiple of the cache's {k_cache.num_kv_heads} KV heads "
                         f"on axis 1, got shape {tuple(q.shape)}")
    check_seq_vector("kv_lens", kv_lens, b, dev)
    check_table_rows(block_table, b)
    check_positive("max_kv_len", max_kv_len)
    capacity = (block_table.shape[1] * k_cache.data.shape[2] if block_table is not None
                else k_cache.data.shape[2])
    if block_table is None and k_cache.data.shape[0] != b:
        raise ValueError(f"k_cache: a contiguous cache needs one slot per sequence ({b}), "
                         f"got {k_cache.data.shape[0]}")
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        if c.bits < 16 and c.head_dim % (32 // c.bits):
            raise ValueError(f"{name}: {c.bits}-bit KV decode reads whole 32-bit words of codes; "
                             f"head_dim must be a multiple of {32 // c.bits}, got {c.head_dim}")
    if max_kv_len > capacity:
        raise ValueError(f"max_kv_len={max_kv_len}: the cache holds at most {capacity} tokens "
                         "per sequence")


def attention_decode(q: torch.Tensor, k_cache: KVCache, v_cache: KVCache, kv_lens: torch.Tensor,
                     *, max_kv_len: int, block_table: torch.Tensor | None = None,
                     sm_scale: float | None = None) -> torch.Tensor:
    """One query token per sequence: q (B, H_q, D) fp16 -> o (B, H_q, D) fp16.

    Sequence b attends to its cached tokens 0..kv_lens[b]-1 (int32, each >= 1; the new token's K/V
    must already be written by kv_quant). max_kv_len >= max(kv_lens) is the host's bound on them
    (no device sync); it sets the split count. sm_scale defaults to 1/sqrt(D).
    """
    _check_decode_args(q, k_cache, v_cache, kv_lens, max_kv_len, block_table)
    b, hq, d = (int(x) for x in q.shape)
    hkv = k_cache.num_kv_heads
    cfg = attention_decode_config(b, hq, hkv, d, max_kv_len, k_cache.bits, k_cache.kv_block,
                                  on_gpu=on_gpu())
    scale = (1.0 / math.sqrt(d)) if sm_scale is None else float(sm_scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    columns = dict(batch=b, q_len=1, kv_len=max_kv_len, num_q_heads=hq, num_kv_heads=hkv,
                   head_dim=d, k_bits=k_cache.bits, v_bits=v_cache.bits, causal=True,
                   kv_block=k_cache.kv_block)
    if active_recorder() is not None and not runtime.capturing():
        # KV tokens read over the batch: a sync, so only while recording, and never inside a CUDA
        # graph capture (mpsim/engine/graphs.py gives each replayed row its step's count)
        columns["kv_tokens"] = int(kv_lens.sum().item())
    args = (q, out, k_cache, v_cache, kv_lens, block_table, scale * LOG2E, cfg)
    ws_key = (q.device, b, hkv, cfg.block_m or 1, cfg.block_k or d)
    try:
        launch_recorded(cfg, "attention", columns, lambda: _launch(*args, max_kv_len))
    except BaseException:
        WORKSPACES.discard(*ws_key)
        raise
    return out


def cache_words(cache: KVCache) -> torch.Tensor:
    """The cache's data as the kernel reads it: fp16 values, or int8/int4 codes as int32 words
    (a view: rows of D or D/2 bytes hold whole words, the head_dim check above)."""
    return cache.data if cache.bits == 16 else cache.data.view(torch.int32)


def _launch(q: torch.Tensor, out: torch.Tensor, k_cache: KVCache, v_cache: KVCache,
            kv_lens: torch.Tensor, block_table: torch.Tensor | None, qk_scale: float,
            cfg: LaunchConfig, max_kv_len: int) -> None:
    b, hq, d = (int(x) for x in q.shape)
    hkv = k_cache.num_kv_heads
    block_g, block_d, splits = cfg.block_m or 1, cfg.block_k or d, cfg.split_k
    ws_acc, ws_ml, counters, ws_splits = WORKSPACES.get(q.device, b, hkv, block_g, block_d,
                                                        splits)
    table, stride_tab, paged, kv_block = slot_args(k_cache, block_table, kv_lens)
    ks, kz = k_cache.scale_or_data()
    vs, vz = v_cache.scale_or_data()
    kd, vd = cache_words(k_cache), cache_words(v_cache)
    kst, vst = kd.stride(), vd.stride()
    sz = k_cache.scale_strides() if k_cache.bits < 16 else v_cache.scale_strides()
    attention_decode_kernel[cfg.grid](
        # pointers
        q_ptr=q, o_ptr=out, kd_ptr=kd, ks_ptr=ks, kz_ptr=kz,
        vd_ptr=vd, vs_ptr=vs, vz_ptr=vz, lens_ptr=kv_lens, table_ptr=table,
        ws_acc=ws_acc, ws_ml=ws_ml, counters=counters,
        # sizes (and the score scale)
        qk_scale=qk_scale, split_len=decode_split_tokens(max_kv_len, cfg), num_splits=splits,
        ws_splits=ws_splits, GROUP=hq // hkv, D=d,
        # strides
        stride_qb=q.stride(0), stride_qh=q.stride(1), stride_ob=out.stride(0),
        stride_oh=out.stride(1),
        stride_kb=kst[0], stride_kh=kst[1], stride_kt=kst[2],
        stride_vb=vst[0], stride_vh=vst[1], stride_vt=vst[2],
        stride_sb=sz[0], stride_sh=sz[1], stride_st=sz[2], stride_tab=stride_tab,
        # constexprs
        K_BITS=k_cache.bits, V_BITS=v_cache.bits, PAGED=paged, KV_BLOCK=kv_block,
        BLOCK_G=block_g, BLOCK_N=cfg.block_n, BLOCK_D=block_d, ONE_SPLIT=splits == 1,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
