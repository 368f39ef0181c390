"""The sliding-window rows of every published attention table, priced with the shipped defaults: by
GPU, stack, class, window and whether the window covers the cache (kv_len <= window: no window to
the kernels) or binds (docs/validation.md#sliding-window-attention-stop-44).

    python -m mpsim.analysis.validation.windows [--groundtruth ../shared/groundtruth] [--sample N]
        [--doc DOC]

Each table's rows with `window_size > 0` are sampled (at most N, a fixed seed) and priced as
`mpsim validate --against` prices them; a row whose kernel's room does not model its window is
counted as unrepresentable with the room's reason. The doc block sits between the
`<!-- validation:windows -->` markers (replaced in place; added at the end the first time).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.against import result_frame
from mpsim.analysis.validation.doc_block import publish, run, write_block
from mpsim.analysis.validation.measured import Measurements
from mpsim.analysis.validation.predict import predict_rows
from mpsim.analysis.validation.sources import read_measurements
from mpsim.analysis.validation.stacks import Table, find_tables, hardware_of
from mpsim.errors import MpsimInputError
from mpsim.hw_models import load_hardware

HEADING = "### Sliding-window attention (stop 44)"
BEGIN, END = "<!-- validation:windows -->", "<!-- /validation:windows -->"
DEFAULT_SAMPLE = 1000
SEED = 20261205
GPU_NAMES = {"h200_sxm": "H200 SXM", "h100_sxm": "H100 SXM", "b200_sxm": "B200 SXM", "l40s": "L40S"}


def window_rows(m: Measurements, sample: int) -> pd.DataFrame:
    """The table's rows under a sliding window (at most `sample`, drawn with a fixed seed)."""
    rows = m.rows[m.rows["window"].fillna(0).astype(int) > 0]
    if len(rows) > sample:
        rows = rows.sample(n=sample, random_state=SEED).sort_index()
    return rows.reset_index(drop=True)


def price(t: Table, sample: int) -> pd.DataFrame:
    """The table's sampled window rows, priced (or with the status saying why not)."""
    rows = window_rows(read_measurements(t.path), sample)
    if rows.empty:
        return rows
    hw = load_hardware(str(hardware_of(t.gpu)))
    frame = result_frame(rows, predict_rows(rows, hw, cache_dir=None, progress=False))
    frame["binds"] = np.where(frame["kv_len"].astype(int) > frame["window"].astype(int), "binds",
                              "covers")
    return frame.assign(gpu=GPU_NAMES.get(t.gpu, t.gpu), stack=t.stack)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per (GPU, stack, class, window, covers/binds): rows, the unrepresentable ones and
    their first reason, MAPE / bias / roofline MAPE (%) of the priced ones."""
    out = []
    for key, g in frame.groupby(["gpu", "stack", "cls", "window", "binds"], sort=True):
        ok = g["status"] == "ok"
        err, roof = g.loc[ok, "error"], (g.loc[ok, "roofline_us"] / g.loc[ok, "measured_us"] - 1)
        why = g.loc[~ok, "status"].astype(str).map(_reason)
        reason = why.value_counts().index[0] if len(why) else ""
        out.append({"gpu": key[0], "stack": key[1], "class": key[2], "window": int(key[3]),
                    "kv": key[4], "rows": len(g), "unrepr.": int((~ok).sum()),
                    "reason": reason if len(reason) <= 70 else reason[:69] + "…",
                    "MAPE": 100 * err.abs().mean() if ok.any() else np.nan,
                    "bias": 100 * err.mean() if ok.any() else np.nan,
                    "roofline MAPE": 100 * roof.abs().mean() if ok.any() else np.nan})
    return pd.DataFrame(out)


def _reason(status: str) -> str:
    """A status as one reason for the whole group (its row's sizes left out)."""
    status = status.removeprefix("unrepresentable: ").removeprefix("attention: ")
    return re.sub(r" of \d+ keys( over \d+| \(kv_len \d+\))", "", status)


def render(summary: pd.DataFrame, sample: int, tables: int) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "–" if np.isnan(v) else f"{v:.1f}"
        return str(v)
    cols = list(summary.columns)
    lines = [f"Sliding-window rows of {tables} attention tables, at most **{sample} a table** (seed "
             f"{SEED}); `kv`: the window covers the cache (kv_len <= window) or binds; errors in %.",
             "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in summary.itertuples(index=False):
        vals = [cell(v) for v in r]
        bias = cols.index("bias")
        vals[bias] = "–" if np.isnan(r[bias]) else f"{r[bias]:+.1f}"
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mpsim.analysis.validation.windows",
                                 description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--groundtruth", type=Path, default=Path("../shared/groundtruth"))
    ap.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, help="window rows a table")
    ap.add_argument("--doc", type=Path, default=None, help="write the block into this doc")
    args = ap.parse_args(argv)
    if args.sample < 1:
        raise MpsimInputError(f"--sample must be >= 1, got {args.sample}")

    def body() -> str:
        if not (args.groundtruth / "aiconfigurator").is_dir():
            raise MpsimInputError(f"{args.groundtruth}: no aiconfigurator/ folder (the published "
                                  "tables: ../shared/groundtruth, docs/validation.md#the-data)")
        tables = [t for t in find_tables(args.groundtruth)[0] if t.family == "attention"]
        if not tables:
            raise MpsimInputError(f"{args.groundtruth}: no aiconfigurator attention tables")
        priced = [price(t, args.sample) for t in tables]
        frame = pd.concat([f for f in priced if not f.empty], ignore_index=True)
        return render(summarize(frame), args.sample, len(tables))

    text = body()
    return publish(text, args.doc, lambda doc: write_block(doc, BEGIN, END, HEADING, text))


if __name__ == "__main__":
    raise SystemExit(run(main))
