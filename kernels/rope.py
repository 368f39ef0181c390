"""Rotary position embedding (GPT-NeoX rotate-half) on the first rot_dim dims of q and k, one launch.

For i < rot_dim/2: out[i] = x[i] cos(a_i) - x[i + h] sin(a_i), out[i + h] = x[i + h] cos(a_i) +
x[i] sin(a_i), with a_i = pos * inv_freq_i the op's fp32 angle (mpsim/opspec.py defines it); dims
from rot_dim on pass through (partial rotary). cos and sin come from a `RopeTable` computed once on the
host in float64 from those fp32 angles and rounded to fp32, so no GPU trig approximation enters and
the kernel is a gather plus two products and a sum per value. One program per token rotates all
its q and k heads (a (heads, rot_dim/2) tile each).
Reference twin: reference/rope.py::rope_ref.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

from mpsim.kernels.launch_checks import check_positive, check_tensor, launch_recorded
from mpsim.kernels.launch_config import next_pow2, rowwise_config
from mpsim.kernels.runtime import on_gpu
from mpsim.opspec import rope_angles


@dataclass(frozen=True)
class RopeTable:
    """cos and sin (max_positions, rot_dim/2) fp32 of the op's angles, on the kernels' device."""

    cos: torch.Tensor
    sin: torch.Tensor
    rot_dim: int
    theta: float

    @staticmethod
    def build(rot_dim: int, theta: float, max_positions: int,
              device: torch.device | None = None) -> RopeTable:
        check_positive("max_positions", max_positions)
        if not isinstance(rot_dim, int) or rot_dim < 2 or rot_dim % 2:
            raise ValueError(f"rot_dim={rot_dim!r}: expected an even int >= 2")
        angles = np.asarray(rope_angles(np.arange(max_positions), rot_dim, theta), np.float64)
        cos = torch.from_numpy(np.cos(angles).astype(np.float32)).to(device)
        sin = torch.from_numpy(np.sin(angles).astype(np.float32)).to(device)
        return RopeTable(cos.contiguous(), sin.contiguous(), rot_dim, float(theta))

    @property
    def max_positions(self) -> int:
        return int(self.cos.shape[0])


@triton.jit
def _rope_heads(x_tok, y_tok, cos_row, sin_row, H, D, HALF, stride_h,
                BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_PASS: tl.constexpr):
    """Rotate all H heads of one token: x_tok (stride_h apart) -> y_tok (contiguous heads)."""
    hd = tl.arange(0, BLOCK_HEADS)[:, None]
    i = tl.arange(0, BLOCK_HALF)[None, :]
    m = (hd < H) & (i < HALF)
    c = tl.load(cos_row + i, mask=i < HALF, other=0.0)
    s = tl.load(sin_row + i, mask=i < HALF, other=0.0)
    x_rows = x_tok + hd * stride_h
    y_rows = y_tok + hd * D
    x1 = tl.load(x_rows + i, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_rows + HALF + i, mask=m, other=0.0).to(tl.float32)
    tl.store(y_rows + i, (x1 * c - x2 * s).to(tl.float16), mask=m)
    tl.store(y_rows + HALF + i, (x2 * c + x1 * s).to(tl.float16), mask=m)
    # Partial rotary: the dims past rot_dim = 2 * HALF are copied unchanged.
    dp = 2 * HALF + tl.arange(0, BLOCK_PASS)[None, :]
    mp = (hd < H) & (dp < D)
    tl.store(y_rows + dp, tl.load(x_rows + dp, mask=mp), mask=mp)


@triton.jit
def rope_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, cos_ptr, sin_ptr,
                T, HQ, HK, D, HALF,
                stride_qb, stride_qt, stride_qh, stride_kb, stride_kt, stride_kh,
                stride_pb, stride_pt, stride_c,
                BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_HALF: tl.constexpr,
                BLOCK_PASS: tl.constexpr):
    """One program per token: all its q heads, then all its k heads, at the token's position."""
    token = tl.program_id(0)
    b = token // T
    t = token % T
    pos = tl.load(pos_ptr + b * stride_pb + t * stride_pt).to(tl.int64)
    cos_row = cos_ptr + pos * stride_c
    sin_row = sin_ptr + pos * stride_c
    q_tok = q_ptr + b.to(tl.int64) * stride_qb + t * stride_qt
    k_tok = k_ptr + b.to(tl.int64) * stride_kb + t * stride_kt
    _rope_heads(q_tok, qo_ptr + token.to(tl.int64) * HQ * D, cos_row, sin_row, HQ, D, HALF,
                stride_qh, BLOCK_HQ, BLOCK_HALF, BLOCK_PASS)
    _rope_heads(k_tok, ko_ptr + token.to(tl.int64) * HK * D, cos_row, sin_row, HK, D, HALF,
                stride_kh, BLOCK_HK, BLOCK_HALF, BLOCK_PASS)


def _check_rope_args(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                     table: RopeTable, check_positions: bool) -> None:
    check_tensor("q", q, (torch.float16,), 4)
    b, t, _, d = (int(s) for s in q.shape)
    check_tensor("k", k, (torch.float16,), 4, (b, t, None, d), q.device)
    check_tensor("positions", positions, (torch.int32, torch.int64), 2, (b, t), q.device,
                 inner_contiguous=False)
    if not isinstance(table, RopeTable):
        raise TypeError(f"table: expected a RopeTable, got {type(table).__name__}")
    if table.rot_dim > d:
        raise ValueError(f"table: rot_dim={table.rot_dim} exceeds head_dim={d}")
    if table.cos.device != q.device:
        raise ValueError(f"table: expected cos/sin on {q.device}, got {table.cos.device}")
    if check_positions:
        lo, hi = int(positions.min()), int(positions.max())
        if lo < 0 or hi >= table.max_positions:
            raise ValueError(f"positions: expected values in [0, {table.max_positions}) (the "
                             f"RopeTable's rows), got values in [{lo}, {hi}]")


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, table: RopeTable, *,
         check_positions: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, T, H_q, D) and k (B, T, H_kv, D) fp16 at positions (B, T) int -> new (q, k).

    The outputs are contiguous. check_positions verifies 0 <= positions < table.max_positions
    (one host sync on a GPU); pass False only for positions in range by construction.
    """
    _check_rope_args(q, k, positions, table, check_positions)
    b, t, hq, d = (int(s) for s in q.shape)
    hk = int(k.shape[2])
    tokens = b * t
    # Trace row as synthesis writes it: m = tokens, n = q and k widths, k = rotated dims.
    cfg = rowwise_config("rope_kernel", tokens, table.rot_dim, on_gpu=on_gpu())
    q_out = torch.empty((b, t, hq, d), dtype=torch.float16, device=q.device)
    k_out = torch.empty((b, t, hk, d), dtype=torch.float16, device=q.device)
    half = table.rot_dim // 2

    def launch() -> None:
        rope_kernel[cfg.grid](
            # pointers
            q_ptr=q, k_ptr=k, qo_ptr=q_out, ko_ptr=k_out, pos_ptr=positions,
            cos_ptr=table.cos, sin_ptr=table.sin,
            # sizes
            T=t, HQ=hq, HK=hk, D=d, HALF=half,
            # strides
            stride_qb=q.stride(0), stride_qt=q.stride(1), stride_qh=q.stride(2),
            stride_kb=k.stride(0), stride_kt=k.stride(1), stride_kh=k.stride(2),
            stride_pb=positions.stride(0), stride_pt=positions.stride(1),
            stride_c=table.cos.stride(0),
            # constexprs
            BLOCK_HQ=next_pow2(hq), BLOCK_HK=next_pow2(hk), BLOCK_HALF=next_pow2(half),
            BLOCK_PASS=next_pow2(max(d - 2 * half, 1)),
            num_warps=cfg.num_warps,
        )

    launch_recorded(cfg, "rope", dict(m=tokens, n=(hq + hk) * d, k=table.rot_dim), launch)
    return q_out, k_out
