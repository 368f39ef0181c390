"""The one-row GEMVs' fp16 partial-sum runs: T K tiles per run, the columns a split must hold.

The group GEMV (kernels/gemv_group.py) and the any-precision GEMV (kernels/gemv_anyprec.py) sum T
consecutive K tiles of one weight lane in fp16 before adding them to the lane's fp32 sum; a K split
covers whole runs. No triton import (kernels/launch_config.py re-exports these for the synthesizer
and the simulator; the kernels wrap them with triton.constexpr_function).
"""

from __future__ import annotations

from mpsim.traces.accounting import PAIR_MAX_BITS

PARTIAL_MAX_BITS = 4  # 8 bits would need E = 10 (kernels/gemv_group.py): products leave fp16's normals
PARTIAL_MAX_TRIPS = 4


def gemv_partial_trips(bits: int, group: int, block_m: int, block_k: int) -> int:
    """K tiles per fp16 partial sum of the group GEMV (kernels/gemv_group.py): T = 4 (2) when one
    activation row, <= 4 bits and the group holds a multiple of 4 (2) K tiles; 1: no partial sums."""
    if block_m != 1 or bits > PARTIAL_MAX_BITS or block_k >= group:
        return 1
    tiles = group // block_k
    return PARTIAL_MAX_TRIPS if tiles % PARTIAL_MAX_TRIPS == 0 else 2 if tiles % 2 == 0 else 1


ANYPREC_PARTIAL_TRIPS = 4  # K tiles per fp16 partial sum of the one-row any-precision GEMV


def gemv_trips(tag: str, bits: int, group: int | None, block_m: int, block_k: int) -> int:
    """K tiles per fp16 partial sum of a GEMV loop iteration (1: none): the group GEMV's
    gemv_partial_trips; any-precision with one activation row at <= PAIR_MAX_BITS (its pair-table
    loop, kernels/gemm_anyprec.py): ANYPREC_PARTIAL_TRIPS (its runs need not respect a group)."""
    if tag == "group" and group:
        return gemv_partial_trips(bits, group, block_m, block_k)
    if tag == "anyprec":
        return anyprec_partial_trips(bits, block_m)
    return 1


def anyprec_partial_trips(bits: int, block_m: int) -> int:
    """T of the one-row any-precision GEMV (kernels/gemv_anyprec.py): ANYPREC_PARTIAL_TRIPS at one
    activation row and <= PAIR_MAX_BITS, else 1 (no partial sums)."""
    return ANYPREC_PARTIAL_TRIPS if block_m == 1 and bits <= PAIR_MAX_BITS else 1


def gemv_k_unit(tag: str, bits: int, group: int | None, block_m: int, block_k: int) -> int:
    """Columns a GEMV split must be a multiple of: BLOCK_K, times T for the partial sums (a run of T
    K tiles never straddles a group, and one split never cuts a run)."""
    return block_k * gemv_trips(tag, bits, group, block_m, block_k)
