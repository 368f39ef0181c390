"""Quantizing a real checkpoint on all cores, bit for bit what mpsim.reference computes.

Both formats quantize each output row on its own, so rows split freely across workers:
- any-precision: the reference's per-row numba clustering (`cluster_row`) under `prange` over a
  chunk of rows (numba threads), chunk after chunk so float64 copies stay one chunk in size;
- group: the reference's numpy `quantize_group` on row chunks in a thread pool (numpy releases the
  GIL in its array loops).
`progress(rows_done)` is called after every chunk (the `mpsim quantize` progress bar counts rows).
tests/engine/test_engine_quantized.py checks both against mpsim.reference on random weights.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit, prange

from mpsim.reference.anyprec import KMEANS_ITERS, AnyPrecWeight, codes_to_planes
from mpsim.reference.anyprec_cluster import cluster_row
from mpsim.reference.group_quant import GroupQuantWeight, quantize_group
from mpsim.traces.accounting import padded_k

Progress = Callable[[int], None]
CHUNK_ELEMENTS = 1 << 22  # rows per chunk ~ 4 M weights / K (32 MiB of float64 per array)


@njit(parallel=True, cache=True)
def _cluster_rows_parallel(w: np.ndarray, sens: np.ndarray, seed: int, parent: int, iters: int) -> tuple:
    """reference.anyprec_cluster.cluster_rows with the row loop under prange (rows are independent)."""
    n, k = w.shape
    codes = np.empty((n, k), dtype=np.uint8)
    luts = np.empty((n, parent + 1, 1 << parent), dtype=np.float64)
    for r in prange(n):
        order = np.argsort(w[r], kind="mergesort")
        row_codes, row_luts = cluster_row(w[r][order], sens[r][order], seed, parent, iters)
        out = np.empty(k, dtype=np.uint8)
        out[order] = row_codes
        codes[r] = out
        luts[r] = row_luts
    return codes, luts


def _chunks(n: int, k: int) -> list[tuple[int, int]]:
    rows = max(1, CHUNK_ELEMENTS // max(k, 1))
    return [(lo, min(n, lo + rows)) for lo in range(0, n, rows)]


def quantize_anyprec_parallel(w: np.ndarray, parent_bits: int = 4, seed_bits: int = 2,
                              sensitivity: np.ndarray | None = None,
                              progress: Progress | None = None) -> AnyPrecWeight:
    """reference.anyprec.quantize_anyprec, on every core, one row chunk at a time."""
    from mpsim.reference.anyprec import _check_widths, _sensitivity

    _check_widths(parent_bits, seed_bits)
    if w.dtype not in (np.float16, np.float32) or w.ndim != 2 or w.shape[1] < 1:
        raise ValueError(f"w: expected a float16/float32 (N, K) array, got {w.dtype} {w.shape}")
    n, k = w.shape
    kp = padded_k(k, None)
    padded = np.zeros((n, kp), dtype=np.uint8)
    luts = {b: np.empty((n, 1 << b), np.float16) for b in range(seed_bits, parent_bits + 1)}
    for lo, hi in _chunks(n, k):
        part = np.ascontiguousarray(w[lo:hi], dtype=np.float64)
        if not np.isfinite(part).all():
            raise ValueError(f"w: contains inf or nan (rows {lo}..{hi - 1})")
        sens = _sensitivity(None if sensitivity is None else sensitivity[lo:hi], part.shape)
        codes, luts64 = _cluster_rows_parallel(part, sens, seed_bits, parent_bits, KMEANS_ITERS)
        padded[lo:hi, :k] = codes
        for b in luts:
            luts[b][lo:hi] = luts64[:, b, : 1 << b].astype(np.float16)
        if progress is not None:
            progress(hi - lo)
    return AnyPrecWeight(codes_to_planes(padded, parent_bits), luts, parent_bits, seed_bits, k, n)


def quantize_group_parallel(w: np.ndarray, bits: int, group_size: int, *, workers: int | None = None,
                            progress: Progress | None = None) -> GroupQuantWeight:
    """reference.group_quant.quantize_group on row chunks in a thread pool, reassembled in order."""
    n, k = w.shape
    chunks = _chunks(n, k)
    workers = workers or min(len(chunks), os.cpu_count() or 1)

    def one(bounds: tuple[int, int]) -> GroupQuantWeight:
        got = quantize_group(w[bounds[0]:bounds[1]], bits, group_size)
        if progress is not None:
            progress(bounds[1] - bounds[0])
        return got

    if workers <= 1 or len(chunks) == 1:
        parts = [one(c) for c in chunks]
    else:
        with ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(one, chunks))
    first = parts[0]
    q, s, z = (np.concatenate([getattr(p, a) for p in parts]) for a in ("qweight", "scales", "zeros"))
    return GroupQuantWeight(q, s, z, bits, first.group_size, k, n, first.symmetric)
