"""KV-cache quantization: new K/V rows (after RoPE) -> fp16, int8 or int4 cache rows, per token per head.

docs/formats.md pins the arithmetic (asymmetric, scale = fp16((max - min) / (2^b - 1)) with a
round-to-nearest division, zero = fp16(min), codes by RNE through the 1.5*2^23 trick) so the codes,
scales and zeros are bit-identical to `mpsim.reference.kv_quant.kv_quant_ref` on every backend.
`load_kv_tile` is the one dequantizer of cache rows; decode attention and `kv_dequant` both use it,
so the bit-exact test of `kv_dequant` covers the values attention consumes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mpsim.kernels.kv_cache import (
    KVCache,
    check_kv_pair,
    check_seq_vector,
    check_table_rows,
    slot_args,
)
from mpsim.kernels.launch_checks import check_positive, check_tensor, launch_recorded
from mpsim.kernels.launch_config import cdiv, kv_quant_config, next_pow2
from mpsim.kernels.runtime import on_gpu

# Globals a @triton.jit body reads must be tl.constexpr (the interpreter does not check this).
RNE_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2^23: (v + M) - M rounds fp32 v in [0, 2^22) to even
RNE_LIMIT = tl.constexpr(4194303.0)   # 2^22 - 1, the top of the range the trick is exact on
DEQUANT_BLOCK_N = 16     # rows per program of the kv_dequant utility kernel


@triton.jit
def cache_rows(seq, pos, table_ptr, stride_tab, PAGED: tl.constexpr, KV_BLOCK: tl.constexpr):
    """(outer index, slot) of token `pos` of sequence `seq`: (seq, pos) or (block_table[...], pos % 64)."""
    if PAGED:
        outer = tl.load(table_ptr + seq * stride_tab + pos // KV_BLOCK).to(tl.int64)
        slot = pos % KV_BLOCK
    else:
        outer = seq.to(tl.int64) + pos * 0
        slot = pos
    return outer, slot


@triton.jit
def _scale_zero(a, b, mask, QMAX: tl.constexpr):
    """Per row of the (BLOCK_T, W) tiles a and b: fp16-rounded scale (as fp32) and zero = min."""
    inf = float("inf")
    mn = tl.minimum(tl.min(tl.where(mask, a, inf), 1), tl.min(tl.where(mask, b, inf), 1))
    mx = tl.maximum(tl.max(tl.where(mask, a, -inf), 1), tl.max(tl.where(mask, b, -inf), 1))
    # Rows with no valid element (past the batch or the new length) get min = max = 0, not +-inf.
    mn = tl.where(mn <= mx, mn, 0.0)
    mx = tl.maximum(mx, mn)
    # + 0.0 turns -0 into +0: which zero min/max return among +-0 is order-dependent (numpy's SIMD
    # min differs by position), so both are pinned to +0 before the scale and the stored zero.
    mn = mn + 0.0
    mx = mx + 0.0
    qmax = tl.full(mn.shape, QMAX, tl.float32)
    scale = tl.div_rn(mx - mn, qmax).to(tl.float16).to(tl.float32)
    return scale, mn


@triton.jit
def _codes(x, scale, zero, QMAX: tl.constexpr):
    """clamp(rne((x - zero) / scale), 0, QMAX) as int32 (scale, zero per row); 0 where scale == 0."""
    s = tl.where(scale == 0.0, 1.0, scale)[:, None] + x * 0.0
    v = tl.div_rn(x - zero[:, None], s)
    v = tl.minimum(tl.maximum(v, 0.0), RNE_LIMIT)
    r = tl.minimum((v + RNE_MAGIC) - RNE_MAGIC, QMAX * 1.0)
    return tl.where((scale == 0.0)[:, None], 0.0, r).to(tl.int32)


@triton.jit
def _quantize_store(x_rows, code_rows, scale_at, zero_at, row_mask, D,
                    BITS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Quantize BLOCK_T rows of D fp16 values (row pointers x_rows) into cache rows code_rows."""
    if BITS == 16:
        d = tl.arange(0, BLOCK_D)
        m = row_mask[:, None] & (d < D)[None, :]
        tl.store(code_rows[:, None] + d[None, :], tl.load(x_rows[:, None] + d[None, :], mask=m),
                 mask=m)
    else:
        QMAX: tl.constexpr = (1 << BITS) - 1
        if BITS == 8:
            d = tl.arange(0, BLOCK_D)
            m = row_mask[:, None] & (d < D)[None, :]
            x = tl.load(x_rows[:, None] + d[None, :], mask=m, other=0.0).to(tl.float32)
            scale, zero = _scale_zero(x, x, m, QMAX)
            tl.store(code_rows[:, None] + d[None, :], _codes(x, scale, zero, QMAX).to(tl.uint8),
                     mask=m)
        else:
            # int4: element 2j -> low nibble of byte j, element 2j+1 -> high nibble. The row is
            # loaded contiguously (vectorized) and split into its even and odd elements.
            d = tl.arange(0, BLOCK_D)
            x = tl.load(x_rows[:, None] + d[None, :], mask=row_mask[:, None] & (d < D)[None, :],
                        other=0.0).to(tl.float32)
            xe, xo = tl.split(tl.reshape(x, [x.shape[0], BLOCK_D // 2, 2]))
            j = tl.arange(0, BLOCK_D // 2)
            m = row_mask[:, None] & (j < D // 2)[None, :]
            scale, zero = _scale_zero(xe, xo, m, QMAX)
            byte = _codes(xe, scale, zero, QMAX) | (_codes(xo, scale, zero, QMAX) << 4)
            tl.store(code_rows[:, None] + j[None, :], byte.to(tl.uint8), mask=m)
        tl.store(scale_at, scale.to(tl.float16), mask=row_mask)
        tl.store(zero_at, zero.to(tl.float16), mask=row_mask)


@triton.jit
def kv_quant_kernel(
    k_ptr, v_ptr, kc_ptr, ks_ptr, kz_ptr, vc_ptr, vs_ptr, vz_ptr,
    start_ptr, lens_ptr, table_ptr,
    TOKENS, T, D,
    stride_xb, stride_xt, stride_xh, stride_yb, stride_yt, stride_yh,
    stride_kcb, stride_kch, stride_kct, stride_vcb, stride_vch, stride_vct,
    stride_sb, stride_sh, stride_st, stride_tab,
    K_BITS: tl.constexpr, V_BITS: tl.constexpr, HAS_LENS: tl.constexpr,
    PAGED: tl.constexpr, KV_BLOCK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """One program per (BLOCK_T new tokens of the flattened (B, T) batch, KV head): K and V rows."""
    idx = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    h = tl.program_id(1)
    in_batch = idx < TOKENS
    seq = tl.where(in_batch, idx // T, 0)
    t = idx % T
    n_new = tl.load(lens_ptr + seq, mask=in_batch, other=0) if HAS_LENS else T
    valid = in_batch & (t < n_new)
    pos = tl.where(valid, tl.load(start_ptr + seq, mask=valid, other=0) + t, 0)
    outer, slot = cache_rows(seq, pos, table_ptr, stride_tab, PAGED, KV_BLOCK)
    x_off = seq.to(tl.int64) * stride_xb + t * stride_xt + h * stride_xh
    y_off = seq.to(tl.int64) * stride_yb + t * stride_yt + h * stride_yh
    sz_off = outer * stride_sb + h * stride_sh + slot * stride_st
    _quantize_store(k_ptr + x_off, kc_ptr + outer * stride_kcb + h * stride_kch + slot * stride_kct,
                    ks_ptr + sz_off, kz_ptr + sz_off, valid, D, K_BITS, BLOCK_D)
    _quantize_store(v_ptr + y_off, vc_ptr + outer * stride_vcb + h * stride_vch + slot * stride_vct,
                    vs_ptr + sz_off, vz_ptr + sz_off, valid, D, V_BITS, BLOCK_D)


@triton.jit
def load_kv_tile(data_ptr, scale_ptr, zero_ptr, row_off, sz_off, row_mask, D,
                 BITS: tl.constexpr, BLOCK_D: tl.constexpr):
    """[BLOCK_N, BLOCK_D] fp16 tile of cache rows, dequantized: fp16(float32(q) * scale + zero).

    row_off: element offset of each row's data; sz_off: offset of its scale/zero (read once per
    token). Masked rows and columns come back as 0 (rows) or as `zero` (columns past D, int8/int4),
    which callers never store and which meet zero q-columns in QK^T.
    """
    if BITS == 16:
        d = tl.arange(0, BLOCK_D)
        m = row_mask[:, None] & (d < D)[None, :]
        tile = tl.load(data_ptr + row_off[:, None] + d[None, :], mask=m, other=0.0)
    else:
        s = tl.load(scale_ptr + sz_off, mask=row_mask, other=0.0).to(tl.float32)[:, None]
        z = tl.load(zero_ptr + sz_off, mask=row_mask, other=0.0).to(tl.float32)[:, None]
        if BITS == 8:
            d = tl.arange(0, BLOCK_D)
            m = row_mask[:, None] & (d < D)[None, :]
            q = tl.load(data_ptr + row_off[:, None] + d[None, :], mask=m, other=0)
            tile = (q.to(tl.float32) * s + z).to(tl.float16)
        else:
            j = tl.arange(0, BLOCK_D // 2)
            # j < D // 2 (not 2j < D): a mask the compiler can prove constant over 16-byte
            # groups, so the packed bytes load as vectors instead of one byte at a time.
            m = row_mask[:, None] & (j < D // 2)[None, :]
            byte = tl.load(data_ptr + row_off[:, None] + j[None, :], mask=m, other=0)
            lo = ((byte & 15).to(tl.float32) * s + z).to(tl.float16)
            hi = ((byte >> 4).to(tl.float32) * s + z).to(tl.float16)
            tile = tl.interleave(lo, hi)
    return tile


@triton.jit
def kv_dequant_kernel(
    c_ptr, s_ptr, z_ptr, lens_ptr, table_ptr, o_ptr,
    H, T_out, D,
    stride_cb, stride_ch, stride_ct, stride_sb, stride_sh, stride_st, stride_tab,
    BITS: tl.constexpr, PAGED: tl.constexpr, KV_BLOCK: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """Dequantize BLOCK_N cached tokens of one (sequence, KV head) into o (B, H, T_out, D); 0 past len."""
    seq = tl.program_id(0)
    h = tl.program_id(1)
    offs_n = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    valid = offs_n < tl.load(lens_ptr + seq)
    outer, slot = cache_rows(seq, tl.where(valid, offs_n, 0), table_ptr, stride_tab, PAGED, KV_BLOCK)
    row_off = outer * stride_cb + h * stride_ch + slot * stride_ct
    sz_off = outer * stride_sb + h * stride_sh + slot * stride_st
    tile = load_kv_tile(c_ptr, s_ptr, z_ptr, row_off, sz_off, valid, D, BITS, BLOCK_D)
    d = tl.arange(0, BLOCK_D)
    o_rows = ((seq * H + h).to(tl.int64) * T_out + offs_n) * D
    tile = tl.where(valid[:, None], tile, 0.0)
    tl.store(o_ptr + o_rows[:, None] + d[None, :], tile,
             mask=(offs_n < T_out)[:, None] & (d < D)[None, :])


def kv_quant(k_new: torch.Tensor, v_new: torch.Tensor, k_cache: KVCache, v_cache: KVCache,
             start_pos: torch.Tensor, *, new_lens: torch.Tensor | None = None,
             block_table: torch.Tensor | None = None, check_positions: bool = True) -> None:
    """Write new K/V rows (B, T, H_kv, D) fp16 into the caches at positions start_pos[b] + t.

    Only t < new_lens[b] is written (right-padded prompts); new_lens=None writes all T. One launch
    quantizes K and V (each with its own bits). Paged caches need block_table (B, max_blocks) int32.
    check_positions verifies on the host that every write lands inside the cache (one sync on a
    GPU; a kernel cannot raise, and an out-of-range write corrupts memory). Pass False only for
    positions the caller has bounded itself.
    """
    check_kv_pair(k_cache, v_cache, block_table)
    dev = k_cache.data.device
    d = k_cache.head_dim
    check_tensor("k_new", k_new, (torch.float16,), 4, (None, None, k_cache.num_kv_heads, d), dev)
    check_tensor("v_new", v_new, (torch.float16,), 4, tuple(k_new.shape), dev)
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        if x.stride(3) != 1:
            raise ValueError(f"{name}: expected a contiguous last (head_dim) axis, got strides {x.stride()}")
    b, t = int(k_new.shape[0]), int(k_new.shape[1])
    check_positive("k_new.shape[1] (new tokens per sequence)", t)
    check_seq_vector("start_pos", start_pos, b, dev)
    if new_lens is not None:
        check_seq_vector("new_lens", new_lens, b, dev)
    check_table_rows(block_table, b)
    if check_positions:
        _check_write_range(k_cache, block_table, start_pos, new_lens, t)
    cfg = kv_quant_config(b * t, k_cache.num_kv_heads, k_cache.head_dim, k_cache.bits,
                          on_gpu=on_gpu())
    table, stride_tab, paged, kv_block = slot_args(k_cache, block_table, start_pos)
    ks, kz = k_cache.scale_or_data()
    vs, vz = v_cache.scale_or_data()
    sz = k_cache.scale_strides() if k_cache.bits < 16 else v_cache.scale_strides()
    xst, yst = k_new.stride(), v_new.stride()
    kst, vst = k_cache.data.stride(), v_cache.data.stride()
    columns = dict(batch=b, q_len=t, num_kv_heads=k_cache.num_kv_heads, head_dim=d,
                   k_bits=k_cache.bits, v_bits=v_cache.bits, kv_block=k_cache.kv_block)

    def launch() -> None:
        kv_quant_kernel[cfg.grid](
            # pointers (without new_lens, start_pos stands in: HAS_LENS=False never reads it)
            k_ptr=k_new, v_ptr=v_new, kc_ptr=k_cache.data, ks_ptr=ks, kz_ptr=kz,
            vc_ptr=v_cache.data, vs_ptr=vs, vz_ptr=vz, start_ptr=start_pos,
            lens_ptr=new_lens if new_lens is not None else start_pos, table_ptr=table,
            # sizes
            TOKENS=b * t, T=t, D=d,
            # strides
            stride_xb=xst[0], stride_xt=xst[1], stride_xh=xst[2],
            stride_yb=yst[0], stride_yt=yst[1], stride_yh=yst[2],
            stride_kcb=kst[0], stride_kch=kst[1], stride_kct=kst[2],
            stride_vcb=vst[0], stride_vch=vst[1], stride_vct=vst[2],
            stride_sb=sz[0], stride_sh=sz[1], stride_st=sz[2], stride_tab=stride_tab,
            # constexprs
            K_BITS=k_cache.bits, V_BITS=v_cache.bits, HAS_LENS=new_lens is not None,
            PAGED=paged, KV_BLOCK=kv_block, BLOCK_T=cfg.block_m, BLOCK_D=cfg.block_n,
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "kv_quant", columns, launch)


def _check_write_range(cache: KVCache, block_table: torch.Tensor | None, start_pos: torch.Tensor,
                       new_lens: torch.Tensor | None, t: int) -> None:
    capacity = (block_table.shape[1] * cache.data.shape[2] if block_table is not None
                else cache.data.shape[2])
    ends = start_pos.long() + (new_lens.long() if new_lens is not None else t)
    lo, hi = int(start_pos.min()), int(ends.max())
    if lo < 0 or hi > capacity:
        raise ValueError(f"start_pos: writes must land in positions [0, {capacity}) of the cache, "
                         f"got positions [{lo}, {hi})")


def kv_dequant(cache: KVCache, kv_lens: torch.Tensor, max_len: int, *,
               block_table: torch.Tensor | None = None) -> torch.Tensor:
    """The cached rows as fp16 (B, H_kv, max_len, D), dequantized exactly as attention reads them.

    Rows at or past kv_lens[b] are 0. A verification and history-expansion utility: it is not one of
    a decoder's traced ops, so it records no trace row.
    """
    check_kv_pair(cache, cache, block_table)
    check_positive("max_len", max_len)
    dev = cache.data.device
    b = block_table.shape[0] if block_table is not None else cache.data.shape[0]
    check_seq_vector("kv_lens", kv_lens, b, dev)
    check_table_rows(block_table, b)
    out = torch.empty((b, cache.num_kv_heads, max_len, cache.head_dim), dtype=torch.float16,
                      device=dev)
    table, stride_tab, paged, kv_block = slot_args(cache, block_table, kv_lens)
    scale, zero = cache.scale_or_data()
    grid = (b, cache.num_kv_heads, cdiv(max_len, DEQUANT_BLOCK_N))
    cst, sst = cache.data.stride(), cache.scale_strides()
    kv_dequant_kernel[grid](
        # pointers
        c_ptr=cache.data, s_ptr=scale, z_ptr=zero, lens_ptr=kv_lens, table_ptr=table, o_ptr=out,
        # sizes
        H=cache.num_kv_heads, T_out=max_len, D=cache.head_dim,
        # strides
        stride_cb=cst[0], stride_ch=cst[1], stride_ct=cst[2],
        stride_sb=sst[0], stride_sh=sst[1], stride_st=sst[2], stride_tab=stride_tab,
        # constexprs
        BITS=cache.bits, PAGED=paged, KV_BLOCK=kv_block, BLOCK_N=DEQUANT_BLOCK_N,
        BLOCK_D=next_pow2(cache.head_dim),
    )
    return out
