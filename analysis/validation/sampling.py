"""A stratified sample of a measured table's selected rows (`mpsim validate --against F --sample N`).

A cold run over every published table is hours on a small machine, so the every-stack report
(stacks.py) and `validate --sample N` price at most N of the selected rows of each table. The
sample is stratified, so a small class or band is not lost:

- strata: op class x M band x dtype (the GEMM's `gemm_dtype`; attention's compute and KV-cache
  dtypes) x `kernel_source` (the table's own columns, where it has them);
- allocation: every non-empty stratum gets min(size, MIN_PER_STRATUM) rows first (fewer when N
  cannot give every stratum that many), the rest of N in proportion to what each stratum has left
  (largest remainders, ties in stratum order);
- rows within a stratum: the first ones of a permutation drawn by numpy's PCG64 generator seeded
  with SEED, the strata visited in sorted order, so the same table gives the same sample on every
  run and machine, and a larger N keeps the rows of a smaller one (the launch memo then prices
  only the new rows).

The selected rows outside the sample keep their place with status `skipped: outside sample N` and
blank predictions; the notes say how many rows and strata were kept.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpsim.analysis.validation.measured import Measurements, activation_rows, band_of
from mpsim.errors import MpsimInputError

SEED = 20261204
MIN_PER_STRATUM = 3
DTYPE_COLUMNS = ("gemm_dtype", "attn_dtype", "kv_cache_dtype")


def skipped_status(n: int) -> str:
    return f"skipped: outside sample {n}"


def strata(m: Measurements) -> pd.Series:
    """The stratum of every row: class | M band | dtypes | kernel_source (text, one per row)."""
    rows = m.rows.reset_index(drop=True)
    d = m.input.reset_index(drop=True)
    key = rows["cls"].astype(str) + "|" + pd.Series(band_of(activation_rows(rows)), dtype=str)
    for col in (*DTYPE_COLUMNS, "kernel_source"):
        key = key + "|" + (d[col].astype(str) if col in d.columns else "")
    return key


def allocate(sizes: np.ndarray, n: int) -> np.ndarray:
    """Rows drawn from each stratum of `sizes` rows: at most n in all, all when they fit."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.sum() <= n:
        return sizes.copy()
    floor = min(MIN_PER_STRATUM, max(1, n // max(len(sizes), 1)))
    base = np.minimum(sizes, floor)
    if base.sum() > n:  # more strata than rows to give: one each to the largest strata
        order = np.argsort(-sizes, kind="stable")[:n]
        out = np.zeros_like(sizes)
        out[order] = 1
        return out
    room = sizes - base
    share = (n - base.sum()) * room / room.sum()
    extra = np.floor(share).astype(np.int64)
    left = int(n - base.sum() - extra.sum())
    extra[np.argsort(-(share - extra), kind="stable")[:left]] += 1
    return np.minimum(base + extra, sizes)


def stratified_sample(m: Measurements, n: int, seed: int = SEED) -> Measurements:
    """`m` with at most `n` of its selected rows (status not `skipped`) kept, stratified (above);
    the other selected rows get status `skipped: outside sample n`."""
    if n < 1:
        raise MpsimInputError(f"--sample {n}: expected at least 1 row per table")
    selected = np.flatnonzero(~m.rows["status"].astype(str).str.startswith("skipped").to_numpy())
    keys = strata(m).to_numpy(dtype=object)[selected]
    names, inverse = np.unique(keys, return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(names))
    take = allocate(sizes, n)
    rng = np.random.default_rng(seed)
    keep = [rng.permutation(selected[inverse == s])[:int(take[s])] for s in range(len(names))]
    kept = np.sort(np.concatenate(keep)) if keep else np.array([], dtype=np.int64)
    rows = m.rows.copy()
    rows.loc[rows.index[np.setdiff1d(selected, kept)], "status"] = skipped_status(n)
    note = (f"sample {n}: {len(kept)} of {len(selected)} selected rows, stratified by class x M band "
            f"x dtype x kernel_source ({len(names)} strata, seed {seed})")
    return Measurements(m.source, m.input, rows, [*m.notes, note])
