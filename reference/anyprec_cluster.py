"""Nested 1-D clustering of one weight row: the numba core of the any-precision format.

Per row, the values are sorted once (stable), with their sensitivities, and every cluster is a
contiguous run [lo, hi) of the sorted order (true of any 1-D k-means fixed point). Prefix sums of
s, s*w, 1 and w give a cluster's weighted mean in O(1).

- Seed (2^seed clusters): weighted Lloyd k-means. Init: centroid i = the sorted value where the
  cumulative sensitivity first reaches (i + 0.5) / m of the row total (weighted quantiles). Each
  iteration assigns by midpoints between consecutive centroids (a value equal to a midpoint goes to
  the lower cluster), stops early when no boundary moves, else recomputes weighted means (an empty
  cluster keeps its centroid). At most `iters` iterations: the result is deterministic.
- Upscaling (one bit at a time up to the parent width): each cluster c at b bits is split into
  children 2c (lower values) and 2c+1 (upper values) by the exact weighted 2-means of the run: the
  cut t maximising SW_L'^2/S_L + SW_R'^2/S_R (sums of s*(w - cluster mean) and s on each side, i.e.
  the least weighted squared error), over cuts between distinct values only; ties -> the lowest cut.
  A run with one distinct value does not split: everything goes to 2c, and 2c+1 is empty.
- Code at b bits = index of the cluster at b bits, so code_b = code_P >> (P - b) by construction.
- LUT entry = weighted mean of the cluster's members (unweighted when their sensitivities sum to 0);
  an empty cluster takes its parent's entry (its kept centroid at the seed width).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _prefix(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(4, K+1) prefix sums of s, s*v, 1, v over the sorted row."""
    k = v.size
    p = np.zeros((4, k + 1), dtype=np.float64)
    for i in range(k):
        p[0, i + 1] = p[0, i] + s[i]
        p[1, i + 1] = p[1, i] + s[i] * v[i]
        p[2, i + 1] = p[2, i] + 1.0
        p[3, i + 1] = p[3, i] + v[i]
    return p


@njit(cache=True)
def _mean(p: np.ndarray, lo: int, hi: int, fallback: float) -> float:
    """Weighted mean of sorted run [lo, hi); unweighted if its weights sum to 0; fallback if empty."""
    if hi <= lo:
        return fallback
    sw = p[0, hi] - p[0, lo]
    if sw > 0.0:
        return (p[1, hi] - p[1, lo]) / sw
    return (p[3, hi] - p[3, lo]) / (hi - lo)


@njit(cache=True)
def _seed_kmeans(v: np.ndarray, p: np.ndarray, m: int, iters: int) -> tuple:
    """Weighted Lloyd k-means on sorted v: (bounds (m+1,), centroids (m,))."""
    k = v.size
    total = p[0, k]
    c = np.empty(m, dtype=np.float64)
    for i in range(m):
        idx = np.searchsorted(p[0, 1:], (i + 0.5) / m * total)
        c[i] = v[min(idx, k - 1)]
    bounds = np.zeros(m + 1, dtype=np.int64)
    bounds[m] = k
    prev = np.full(m + 1, -1, dtype=np.int64)
    for _ in range(iters):
        for i in range(1, m):
            bounds[i] = np.searchsorted(v, 0.5 * (c[i - 1] + c[i]), side="right")
        if np.array_equal(bounds, prev):
            break
        prev[:] = bounds
        for i in range(m):
            c[i] = _mean(p, bounds[i], bounds[i + 1], c[i])
    return bounds, c


@njit(cache=True)
def _best_cut(v: np.ndarray, p: np.ndarray, lo: int, hi: int) -> int:
    """Exact weighted 2-means cut of sorted run [lo, hi); hi when the run has one distinct value."""
    best_t = hi
    if hi - lo < 2:
        return best_t
    s_tot = p[0, hi] - p[0, lo]
    mu = _mean(p, lo, hi, 0.0)
    best = -1.0
    for t in range(lo + 1, hi):
        if v[t - 1] == v[t]:
            continue
        s_l = p[0, t] - p[0, lo]
        d_l = (p[1, t] - p[1, lo]) - s_l * mu  # sum of s*(w - mu) on the left
        s_r = s_tot - s_l
        gain = 0.0
        if s_l > 0.0:
            gain += d_l * d_l / s_l
        if s_r > 0.0:
            gain += d_l * d_l / s_r  # the right side's sum is -d_l
        if gain > best:
            best, best_t = gain, t
    return best_t


@njit(cache=True)
def cluster_row(v: np.ndarray, s: np.ndarray, seed: int, parent: int, iters: int) -> tuple:
    """Sorted row (v, s) -> (parent codes in sorted order uint8 (K,), luts f64 (parent+1, 2^parent))."""
    p = _prefix(v, s)
    bounds, cent = _seed_kmeans(v, p, 1 << seed, iters)
    luts = np.zeros((parent + 1, 1 << parent), dtype=np.float64)
    for c in range(1 << seed):
        luts[seed, c] = _mean(p, bounds[c], bounds[c + 1], cent[c])
    for b in range(seed, parent):
        nb = np.empty((1 << (b + 1)) + 1, dtype=np.int64)
        nb[-1] = v.size
        for c in range(1 << b):
            lo, hi = bounds[c], bounds[c + 1]
            t = _best_cut(v, p, lo, hi)
            nb[2 * c], nb[2 * c + 1] = lo, t
            luts[b + 1, 2 * c] = _mean(p, lo, t, luts[b, c])
            luts[b + 1, 2 * c + 1] = _mean(p, t, hi, luts[b, c])
        bounds = nb
    codes = np.empty(v.size, dtype=np.uint8)
    for c in range(1 << parent):
        codes[bounds[c] : bounds[c + 1]] = c
    return codes, luts


@njit(cache=True)
def cluster_rows(w: np.ndarray, sens: np.ndarray, seed: int, parent: int, iters: int) -> tuple:
    """Every row of w (N, K) f64 with sensitivities (N, K) f64 -> (codes uint8 (N, K), luts f64)."""
    n, k = w.shape
    codes = np.empty((n, k), dtype=np.uint8)
    luts = np.empty((n, parent + 1, 1 << parent), dtype=np.float64)
    for r in range(n):
        order = np.argsort(w[r], kind="mergesort")
        row_codes, row_luts = cluster_row(w[r][order], sens[r][order], seed, parent, iters)
        codes[r][order] = row_codes
        luts[r] = row_luts
    return codes, luts
