"""Lookup-table rows the any-precision kernels address by OR: each row starts at a multiple of its size.

The GEMV, GEMM and dequantization gathers of kernels/anyprec_dequant.py read a value of a row of
the LUT (4 bits: 16 fp16, 32 bytes) or of the pair table (<= 3 bits: 4^b int32 words, 64 or 256
bytes) at the row's address plus the value's byte offset. With the row aligned to its size the
offset fits under the row's lowest set address bit, so the sum is an OR of the offset into the
low 32-bit half of the address: one LOP3 that also masks the code out of its word, where an add
takes a 64-bit LEA / LEA.HI.X pair after the mask (sm_90a SASS, scripts/sass_mix.py:
docs/kernels.md#or-addressed-table-rows). A table whose rows are not so aligned would read the
wrong values, so the launchers check it (check_rows_aligned): CUDA's allocations start at
multiples of 512 bytes, the CPU allocator's at multiples of 64, and pair_table allocates its
tables at their row size (aligned_empty).
"""

from __future__ import annotations

import math

import torch


def row_bytes(t: torch.Tensor) -> int:
    """Bytes of one row of a contiguous table (its last dimensions after the first)."""
    return math.prod(t.shape[1:]) * t.element_size()


def aligned_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str,
                  align: int) -> torch.Tensor:
    """An uninitialized contiguous tensor whose first element sits at a multiple of `align` bytes
    (a power of two), carved from a slightly larger byte buffer."""
    if align < 1 or align & (align - 1):
        raise ValueError(f"align: expected a power of two, got {align}")
    nbytes = math.prod(shape) * dtype.itemsize
    buf = torch.empty(nbytes + align, dtype=torch.uint8, device=device)
    start = -buf.data_ptr() % align
    return buf[start:start + nbytes].view(dtype).view(shape)


def check_rows_aligned(name: str, t: torch.Tensor) -> None:
    """One error naming the table unless its rows start at multiples of their size (a power of
    two: the OR addressing above)."""
    size = row_bytes(t)
    if size & (size - 1):
        raise ValueError(f"{name}: rows of {size} bytes; the any-precision kernels address table "
                         "rows by OR and need a power-of-two row size")
    if t.data_ptr() % size:
        raise ValueError(f"{name}: its rows of {size} bytes must start at multiples of {size} bytes "
                         f"(the kernels OR each value's offset into its row's address), but the "
                         f"table starts at {t.data_ptr() % size} bytes past one: build it with "
                         "gemm_anyprec.pair_table (pair tables) or copy it into a fresh tensor")


def rows_aligned(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when its rows start at multiples of their size, else a contiguous copy whose
    rows do (AnyPrecWeight aligns its LUTs so when a weight is loaded, once)."""
    size = row_bytes(t)
    if t.is_contiguous() and t.data_ptr() % size == 0:
        return t
    out = aligned_empty(tuple(t.shape), t.dtype, t.device, size)
    out.copy_(t)
    return out
