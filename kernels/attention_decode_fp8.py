"""Decode attention over an fp8 e4m3 KV cache (`+kv8f`): one fp32 scale per KV head (per tensor: the
same value for every head), and the kernel that writes the cache's codes.

Cache: codes uint8 (slots, H_kv, tokens, D) in kernels/kv_cache.py's layout (contiguous: one slot per
sequence; paged: blocks of `tokens` rows and a block table), K and V scales fp32 (H_kv,). A cached
value is e4m3(c) s (vLLM's fp8 KV cache with its k_scale / v_scale; written as
e4m3_satfinite(fl(x / s)), dividing as vLLM's scaled_convert does).

Decode: flash-decoding exactly as kernels/attention_decode.py (its workspace, split merge, score and
value products), on fp16 tiles made from the codes with no rounding: code c becomes the fp16 number
e4m3(c) 2^-8 (`_fp8_tile`, two codes of a 32-bit word at a time: the e4m3 exponent and mantissa
bits placed in fp16's, the sign in fp16's; e4m3 subnormals land on fp16 subnormals; every e4m3 value
times 2^-8 is an fp16 value). The scales
are folded out of the loop: the score scale becomes fl(fl(sm_scale log2(e)) s_k) 2^8 (two roundings,
one more than the fp16 kernel's; the 2^8 is exact), and each split's accumulator is multiplied by
s_v 2^8 once before the merge (one rounding per element).
Reference twin: reference/attention_fp8kv.py::attention_decode_fp8_ref (numba).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from mpsim.kernels import runtime
from mpsim.kernels.attention_decode import LOG2E, WORKSPACES, _finish, _scores, _weighted_values
from mpsim.kernels.fp8_act_quant import e4m3_code
from mpsim.kernels.kv_cache import check_seq_vector, check_table_rows
from mpsim.kernels.kv_quant import cache_rows
from mpsim.kernels.launch_checks import check_positive, check_tensor, launch_recorded
from mpsim.kernels.launch_config import LaunchConfig, decode_split_tokens
from mpsim.kernels.launch_config_fp import attention_decode_fp8_config, kv_fp8_quant_config
from mpsim.kernels.runtime import on_gpu
from mpsim.traces.recorder import active_recorder


@triton.jit
def _half_pair(h):
    """uint32 whose 16-bit halves are fp16 bit patterns -> (low, high) fp16 tensors joined."""
    lo = (h & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (h >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return lo, hi


@triton.jit
def _fp8_tile(ptr, off, valid, D, BLOCK_D: tl.constexpr):
    """(BLOCK_N, BLOCK_D) fp16 tile of e4m3(c) 2^-8 for the rows at `off` (in 32-bit words), 0 past D
    or invalid rows. Two codes per integer op chain: bytes 0 and 2 of a word w become the halves of
    ((w << 8) & 0x80008000) | ((w << 7) & 0x3F803F80), bytes 1 and 3 those of
    (w & 0x80008000) | ((w >> 1) & 0x3F803F80) (sign to bit 15, exponent and mantissa to bits 7..14
    of each half; the other bytes' bits fall outside the masks)."""
    W: tl.constexpr = BLOCK_D // 4
    dw = tl.arange(0, W)
    w = tl.load(ptr + off[:, None] + dw[None, :], mask=valid[:, None] & (dw < D // 4)[None, :], other=0)
    w = w.to(tl.uint32, bitcast=True)
    a_lo, a_hi = _half_pair(((w << 8) & 0x80008000) | ((w << 7) & 0x3F803F80))  # codes 0, 2
    b_lo, b_hi = _half_pair((w & 0x80008000) | ((w >> 1) & 0x3F803F80))  # codes 1, 3
    v = tl.join(tl.join(a_lo, a_hi), tl.join(b_lo, b_hi))  # [n, w, h, j] = code 2h + j of word w
    return tl.reshape(v, (off.shape[0], BLOCK_D))


@triton.jit
def attention_decode_fp8_kernel(
    q_ptr, o_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, lens_ptr, table_ptr, ws_acc, ws_ml, counters,
    qk_scale, split_len, num_splits, ws_splits, GROUP, D,
    stride_qb, stride_qh, stride_ob, stride_oh, stride_cb, stride_ch, stride_ct, stride_tab,
    PAGED: tl.constexpr, KV_BLOCK: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, ONE_SPLIT: tl.constexpr,
):
    """Program (sequence, KV head, split): kernels/attention_decode.py's loop on _fp8_tile tiles."""
    seq = tl.program_id(0)
    hk = tl.program_id(1)
    sp = tl.program_id(2)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    head = hk * GROUP + g
    gd_mask = (g < GROUP)[:, None] & (d < D)[None, :]
    q = tl.load(q_ptr + seq * stride_qb + head[:, None] * stride_qh + d[None, :], mask=gd_mask,
                other=0.0)
    score_scale = qk_scale * tl.load(ks_ptr + hk) * 256.0  # fl(s_k 2^8) is exact; see launcher
    kv_len = tl.load(lens_ptr + seq)
    lo = sp * split_len
    hi = tl.minimum(lo + split_len, kv_len)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        valid = offs_n < hi
        outer, slot = cache_rows(seq, tl.where(valid, offs_n, 0), table_ptr, stride_tab, PAGED,
                                 KV_BLOCK)
        off = outer * stride_cb + hk * stride_ch + slot * stride_ct
        raw = _scores(q, _fp8_tile(kc_ptr, off, valid, D, BLOCK_D), BLOCK_G)
        s = tl.where(valid[None, :], raw * score_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _weighted_values(p, _fp8_tile(vc_ptr, off, valid, D, BLOCK_D), BLOCK_G)
        m_i = m_new
    acc = acc * (tl.load(vs_ptr + hk) * 256.0)
    o_ptrs = o_ptr + seq * stride_ob + head[:, None] * stride_oh + d[None, :]
    _finish(acc, m_i, l_i, o_ptrs, gd_mask, ws_acc, ws_ml, counters, seq, hk, sp, num_splits,
            ws_splits, g, d, BLOCK_G, BLOCK_D, ONE_SPLIT)


@triton.jit
def kv_fp8_quant_kernel(x_ptr, s_ptr, c_ptr, H, D, stride_xt, stride_xh, stride_ct, stride_ch,
                        BLOCK_D: tl.constexpr, HW_CVT: tl.constexpr):
    """Program (token, head): codes = e4m3_satfinite(fl(x / s_head))."""
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    d = tl.arange(0, BLOCK_D)
    x = tl.load(x_ptr + t * stride_xt + h * stride_xh + d, mask=d < D, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + h)
    tl.store(c_ptr + t * stride_ct + h * stride_ch + d, e4m3_code(tl.div_rn(x, s + x * 0.0), HW_CVT),
             mask=d < D)


def kv_fp8_quant(x: torch.Tensor, scales: torch.Tensor,
                 record: dict[str, Any] | None = None) -> torch.Tensor:
    """New K or V rows x fp16 (T, H, D) -> e4m3 codes uint8 (T, H, D) with one fp32 scale per head
    (H,) (a per-tensor scale: the same value H times). The caller places the rows in its cache; the
    engine passes a layer's K and V heads stacked (H = 2 H_kv), one launch. `record`: the trace
    columns of the KV write (op kv_quant) when a capture is running; None records nothing."""
    x = check_tensor("x", x, (torch.float16,), 3)
    t, h, d = (int(v) for v in x.shape)
    scales = check_tensor("scales", scales, (torch.float32,), 1, shape=(h,), device=x.device)
    codes = torch.empty((t, h, d), dtype=torch.uint8, device=x.device)
    if t == 0:
        return codes
    cfg = kv_fp8_quant_config(t, h, d)
    launch_recorded(cfg, "kv_quant", record, lambda: kv_fp8_quant_kernel[cfg.grid](
        x, scales, codes, h, d, x.stride(0), x.stride(1), codes.stride(0), codes.stride(1),
        BLOCK_D=cfg.block_n, HW_CVT=on_gpu(), num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    return codes


def _check(q: torch.Tensor, k_codes: torch.Tensor, v_codes: torch.Tensor, k_scales: torch.Tensor,
           v_scales: torch.Tensor, kv_lens: torch.Tensor, max_kv_len: int,
           block_table: torch.Tensor | None) -> None:
    dev = k_codes.device
    check_tensor("k_codes", k_codes, (torch.uint8,), 4, device=dev)
    hkv, tokens, d = (int(v) for v in k_codes.shape[1:])
    check_tensor("v_codes", v_codes, (torch.uint8,), 4, shape=tuple(k_codes.shape), device=dev)
    if v_codes.stride() != k_codes.stride():
        raise ValueError(f"v_codes: expected k_codes' strides {k_codes.stride()}, got {v_codes.stride()}")
    for name, s in (("k_scales", k_scales), ("v_scales", v_scales)):
        check_tensor(name, s, (torch.float32,), 1, shape=(hkv,), device=dev)
    check_tensor("q", q, (torch.float16,), 3, (None, None, d), dev)
    if d % 4 or any(x % 4 for x in k_codes.stride()[:3]):
        raise ValueError(f"k_codes: fp8 KV decode reads whole 32-bit words: head_dim must be a multiple "
                         f"of 4 and the rows 4-byte aligned, got shape {tuple(k_codes.shape)}, "
                         f"strides {k_codes.stride()}")
    b, hq = int(q.shape[0]), int(q.shape[1])
    if hq % hkv:
        raise ValueError(f"q: expected a multiple of the cache's {hkv} KV heads on axis 1, "
                         f"got {tuple(q.shape)}")
    check_seq_vector("kv_lens", kv_lens, b, dev)
    check_table_rows(block_table, b)
    check_positive("max_kv_len", max_kv_len)
    if block_table is None and k_codes.shape[0] != b:
        raise ValueError(f"k_codes: a contiguous cache needs one slot per sequence ({b}), "
                         f"got {k_codes.shape[0]}")
    if block_table is not None:
        check_tensor("block_table", block_table, (torch.int32,), 2, None, dev)
    capacity = tokens * (block_table.shape[1] if block_table is not None else 1)
    if max_kv_len > capacity:
        raise ValueError(f"max_kv_len={max_kv_len}: the cache holds at most {capacity} tokens per sequence")


def attention_decode_fp8(q: torch.Tensor, k_codes: torch.Tensor, v_codes: torch.Tensor,
                         k_scales: torch.Tensor, v_scales: torch.Tensor, kv_lens: torch.Tensor, *,
                         max_kv_len: int, block_table: torch.Tensor | None = None,
                         sm_scale: float | None = None,
                         config: LaunchConfig | None = None) -> torch.Tensor:
    """q (B, H_q, D) fp16 over the fp8 cache (module doc) -> o (B, H_q, D) fp16; kv_lens, max_kv_len,
    block_table and sm_scale as kernels/attention_decode.py's attention_decode (a paged cache's
    block is its `tokens` axis); `config`: the launch config (None: attention_decode_fp8_config; the
    engine's CUDA-graph replay passes the graph capacity's)."""
    _check(q, k_codes, v_codes, k_scales, v_scales, kv_lens, max_kv_len, block_table)
    b, hq, d = (int(x) for x in q.shape)
    hkv, tokens = int(k_codes.shape[1]), int(k_codes.shape[2])
    paged = block_table is not None
    cfg = config or attention_decode_fp8_config(b, hq, hkv, d, max_kv_len, tokens if paged else None,
                                                on_gpu=on_gpu())
    scale = (1.0 / math.sqrt(d)) if sm_scale is None else float(sm_scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    columns = dict(batch=b, q_len=1, kv_len=max_kv_len, num_q_heads=hq, num_kv_heads=hkv, head_dim=d,
                   k_bits=8, v_bits=8, causal=True, kv_block=tokens if paged else None,
                   kv_format="fp8-e4m3")
    if active_recorder() is not None and not runtime.capturing():
        # KV tokens read over the batch: a sync, so only while recording, and never inside a CUDA
        # graph capture (mpsim/engine/graphs.py gives each replayed row its step's count)
        columns["kv_tokens"] = int(kv_lens.sum().item())
    block_g, block_d, splits = cfg.block_m or 1, cfg.block_k or d, cfg.split_k
    ws_key = (q.device, b, hkv, block_g, block_d)
    ws_acc, ws_ml, counters, ws_splits = WORKSPACES.get(*ws_key, splits)
    st = [x // 4 for x in k_codes.stride()]  # the kernel reads 32-bit words
    kw, vw = k_codes.view(torch.int32), v_codes.view(torch.int32)
    table = block_table if block_table is not None else kv_lens

    def launch() -> None:
        attention_decode_fp8_kernel[cfg.grid](
            q, out, kw, vw, k_scales, v_scales, kv_lens, table, ws_acc, ws_ml, counters,
            float(np.float32(scale * LOG2E)), decode_split_tokens(max_kv_len, cfg), splits, ws_splits,
            hq // hkv, d, q.stride(0), q.stride(1), out.stride(0), out.stride(1), st[0], st[1], st[2],
            block_table.stride(0) if block_table is not None else 0,
            PAGED=paged, KV_BLOCK=tokens if paged else 64, BLOCK_G=block_g, BLOCK_N=cfg.block_n,
            BLOCK_D=block_d, ONE_SPLIT=splits == 1, num_warps=cfg.num_warps, num_stages=cfg.num_stages)

    try:
        launch_recorded(cfg, "attention", columns, launch)
    except BaseException:
        WORKSPACES.discard(*ws_key)
        raise
    return out
