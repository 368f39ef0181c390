"""Steps at tile edges: how much a published FP8/FP4 GEMM slows when M passes a power of two by one
row, and how much the simulator says it does (docs/validation.md#steps-at-tile-edges).

    python -m mpsim.analysis.validation.tile_steps [--groundtruth ../shared/groundtruth]
        [--pairs 12] [--workers 2] [--doc docs/validation.md]

For each file of the FP8 GEMM table (fp8_table.FILES), class and edge a (32, 64, ..., 2048), the
(n, k) shapes measured at both M = a and M = a + 1: the measured step is the median over them of
t(a + 1) / t(a) (with its 10th and 90th percentiles); the simulated step the median of the same
ratio of the shipped model's prices on `--pairs` of those shapes (a fixed-seed choice). A kernel
whose last M tile is mostly padding does up to twice the work of the aligned M below it, so a step
of 1.0-1.2 is ordinary tile quantization; a step near 2 is a slow path for the unaligned M that
the model does not know. The table is printed, or written between `<!-- validation:tile-steps -->`
markers. Absent files are skipped with a reason.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.fp8_table import CLASSES, finish, over_files
from mpsim.analysis.validation.report_md import write_doc

EDGES = (32, 64, 128, 256, 512, 1024, 2048)
SEED = 26
MARKER = "tile-steps"
HEADER = ("| GPU | stack | class | M edge | shapes | measured t(M+1)/t(M) | p10-p90 | simulated | "
          "priced shapes |\n|---|---|---|---|---|---|---|---|---|")


def edge_ratios(rows: pd.DataFrame, column: str) -> dict[int, pd.Series]:
    """Per edge a, t(a + 1) / t(a) of `column` for every (n, k) at both M (median of repeated rows),
    over the rows whose status is ok."""
    t = rows[rows["status"] == "ok"].groupby(["n", "k", "m"])[column].median().unstack("m")
    out = {}
    for a in EDGES:
        if a in t.columns and a + 1 in t.columns:
            ratio = (t[a + 1] / t[a]).dropna()
            if not ratio.empty:
                out[a] = ratio
    return out


def measured_steps(rows: pd.DataFrame, cls: str) -> dict[int, pd.Series]:
    """Per edge a, the measured t(a + 1) / t(a) of every (n, k) of class `cls` published at both."""
    return edge_ratios(rows[rows["cls"].astype(str) == cls], "measured_us")


def chosen_rows(rows: pd.DataFrame, cls: str, steps: dict[int, pd.Series], pairs: int) -> pd.Series:
    """A mask of one row per (shape, M) for `pairs` shapes of each edge (fixed seed)."""
    rng = np.random.default_rng(SEED)
    keep = pd.Series(False, index=rows.index)
    ok = (rows["cls"].astype(str) == cls) & (rows["status"] == "ok")
    for a, ratio in steps.items():
        shapes = list(ratio.index)
        pick = rng.choice(len(shapes), size=min(pairs, len(shapes)), replace=False)
        for i in sorted(pick):
            n, k = shapes[i]
            for m in (a, a + 1):
                hit = rows.index[ok & (rows["n"] == n) & (rows["k"] == k) & (rows["m"] == m)]
                keep.loc[hit[:1]] = True
    return keep


def simulated_steps(frame: pd.DataFrame) -> dict[int, tuple[float, int]]:
    """Per edge, the median predicted t(a + 1) / t(a) over the priced shapes, and their count."""
    return {a: (float(r.median()), len(r)) for a, r in edge_ratios(frame, "predicted_us").items()}


def _one(job: tuple[tuple[str, str, str, str, str], Path, int]) -> list[str]:
    from mpsim.analysis.validation.against import validate_against
    from mpsim.analysis.validation.measured import Measurements
    from mpsim.analysis.validation.selections import apply_selection
    from mpsim.analysis.validation.sources import read_measurements
    from mpsim.hw_models.loader import load_hardware

    (gpu, _, hw, fw, version), path, pairs = job
    m = apply_selection(read_measurements(path), "fp8")
    out = []
    for cls in CLASSES:
        steps = measured_steps(m.rows, cls)
        if not steps:
            continue
        rows = m.rows.copy()
        keep = chosen_rows(rows, cls, steps, pairs)
        rows.loc[~keep & (rows["status"] == "ok"), "status"] = "skipped: not a tile-edge pair"
        frame = validate_against(Measurements(m.source, m.input, rows, m.notes), load_hardware(hw),
                                 progress=False).frame
        sim = simulated_steps(frame)
        for a, ratio in steps.items():
            s, priced = sim.get(a, (float("nan"), 0))
            lo, hi = np.percentile(ratio.to_numpy(dtype=float), [10, 90])
            out.append(f"| {gpu} | {fw} {version} | {cls} | {a} | {len(ratio)} | {ratio.median():.2f} | "
                       f"{lo:.2f}-{hi:.2f} | {s:.2f} | {priced} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=Path("../shared/groundtruth"))
    p.add_argument("--pairs", type=int, default=12, help="shapes priced per edge and class (at most)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--doc", type=Path, help="write between the doc's <!-- validation:tile-steps --> markers")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error(f"--pairs {args.pairs}: expected a positive number of shapes")
    if args.doc is not None:
        write_doc(args.doc, {MARKER: ""}, dry=True)  # a missing marker fails before any work
    lines = over_files(args.groundtruth, _one, args.pairs, args.workers)
    return finish(lines, HEADER, args.doc, MARKER, "the tile-step table", args.groundtruth)


if __name__ == "__main__":
    raise SystemExit(main())
