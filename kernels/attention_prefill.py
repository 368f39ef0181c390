"""Causal prefill attention over the prompt's own fp16 K/V: flash-attention style, GQA, ragged batch.

Right-padded batch layout (B, T, H, D): sequence b has seq_lens[b] real tokens, query i attends keys
j <= i (and j < seq_lens[b]); rows at or past seq_lens[b] are written as 0. A program owns BLOCK_M
query rows of one (sequence, query head) and walks the key tiles up to its last row (the causal
bound), keeping an fp32 online softmax (exp2 with log2(e) folded into the scale); QK^T and PV are
tl.dot on fp16 operands with fp32 accumulation, P rounded to fp16 for PV (as flash attention does,
and as the attention bound's p_fp16 term accounts for). Quantized KV only speeds up decode
(docs/sources.md#turbomind-formats): the prompt attends to its fp16 K/V; kv_quant writes the cache beside it.
Reference twin: reference/attention_prefill.py::attention_prefill_ref.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from mpsim.kernels.attention_decode import LOG2E
from mpsim.kernels.kv_cache import check_seq_vector
from mpsim.kernels.launch_checks import check_tensor, launch_recorded
from mpsim.kernels.launch_config import attention_prefill_config
from mpsim.kernels.runtime import on_gpu


@triton.jit
def _load_rows(ptr, b, offs, h, stride_b, stride_t, stride_h, row_mask, d, D):
    """(len(offs), BLOCK_D) fp16 rows offs of head h of sequence b; 0 where masked."""
    mask = row_mask[:, None] & (d < D)[None, :]
    return tl.load(ptr + b.to(tl.int64) * stride_b + offs[:, None] * stride_t + h * stride_h
                   + d[None, :], mask=mask, other=0.0)


@triton.jit
def attention_prefill_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lens_ptr,
    qk_scale, T, H, GROUP, D,
    stride_qb, stride_qt, stride_qh, stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh, stride_ob, stride_ot, stride_oh,
    HAS_LENS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    hk = h // GROUP
    seq_len = tl.load(lens_ptr + b) if HAS_LENS else T
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    q = _load_rows(q_ptr, b, offs_m, h, stride_qb, stride_qt, stride_qh, offs_m < seq_len, d, D)
    # Causal: this tile's last query row sees keys up to itself; a padding-only tile sees none.
    hi = tl.where(pid_m * BLOCK_M < seq_len, tl.minimum((pid_m + 1) * BLOCK_M, seq_len), 0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < seq_len
        k = _load_rows(k_ptr, b, offs_n, hk, stride_kb, stride_kt, stride_kh, n_ok, d, D)
        keep = (offs_n[None, :] <= offs_m[:, None]) & n_ok[None, :]
        s = tl.where(keep, tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
        # Key 0 is in the first tile and every row keeps it, so m_new is finite from there on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_rows(v_ptr, b, offs_n, hk, stride_vb, stride_vt, stride_vh, n_ok, d, D)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    row_ok = offs_m < seq_len
    out = tl.where(row_ok[:, None], acc / tl.where(row_ok, l_i, 1.0)[:, None], 0.0)
    o_ptrs = (o_ptr + b.to(tl.int64) * stride_ob + offs_m[:, None] * stride_ot + h * stride_oh
              + d[None, :])
    tl.store(o_ptrs, out.to(tl.float16), mask=(offs_m < T)[:, None] & (d < D)[None, :])


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      seq_lens: torch.Tensor | None = None, *,
                      sm_scale: float | None = None) -> torch.Tensor:
    """Causal attention of a right-padded prompt batch: q (B, T, H_q, D), k/v (B, T, H_kv, D) fp16.

    seq_lens (B,) int32 gives each sequence's real length (None: all T); returns o (B, T, H_q, D)
    fp16, contiguous, 0 on padding rows. Any strides with a contiguous last axis are accepted (views
    of a fused QKV projection). sm_scale defaults to 1/sqrt(D).
    """
    check_tensor("q", q, (torch.float16,), 4)
    b, t, hq, d = (int(x) for x in q.shape)
    check_tensor("k", k, (torch.float16,), 4, (b, t, None, d), q.device)
    hkv = int(k.shape[2])
    check_tensor("v", v, (torch.float16,), 4, (b, t, hkv, d), q.device)
    if hkv < 1 or hq % hkv:
        raise ValueError(f"k: expected a number of KV heads dividing q's {hq} heads, "
                         f"got shape {tuple(k.shape)}")
    if seq_lens is not None:
        check_seq_vector("seq_lens", seq_lens, b, q.device)
    cfg = attention_prefill_config(b, t, hq, hkv, d, on_gpu=on_gpu())
    scale = (1.0 / math.sqrt(d)) if sm_scale is None else float(sm_scale)
    out = torch.empty((b, t, hq, d), dtype=torch.float16, device=q.device)
    columns = dict(batch=b, q_len=t, kv_len=t, num_q_heads=hq, num_kv_heads=hkv, head_dim=d,
                   k_bits=16, v_bits=16, causal=True, kv_block=None)

    def launch() -> None:
        attention_prefill_kernel[cfg.grid](
            # pointers (without seq_lens, q stands in for lens_ptr: HAS_LENS=False never reads it)
            q_ptr=q, k_ptr=k, v_ptr=v, o_ptr=out,
            lens_ptr=seq_lens if seq_lens is not None else q,
            # sizes (and the score scale)
            qk_scale=scale * LOG2E, T=t, H=hq, GROUP=hq // hkv, D=d,
            # strides
            stride_qb=q.stride(0), stride_qt=q.stride(1), stride_qh=q.stride(2),
            stride_kb=k.stride(0), stride_kt=k.stride(1), stride_kh=k.stride(2),
            stride_vb=v.stride(0), stride_vt=v.stride(1), stride_vh=v.stride(2),
            stride_ob=out.stride(0), stride_ot=out.stride(1), stride_oh=out.stride(2),
            # constexprs
            HAS_LENS=seq_lens is not None, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            BLOCK_D=cfg.block_k,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )

    launch_recorded(cfg, "attention", columns, launch)
    return out
