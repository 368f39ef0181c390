"""The leave-one-out table (loo.py) as markdown, and its place in docs/validation.md: between the
`<!-- validation:loo -->` markers under the heading HEADING (added at the end of the doc the first
time, replaced in place after; the prose around the markers is the doc's own)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from mpsim.analysis.validation.doc_block import write_block

HEADING = "## Leave one device out (issue 24 point 3)"
BEGIN, END = "<!-- validation:loo -->", "<!-- /validation:loo -->"


def _cell(col: str, v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def markdown(t: pd.DataFrame, fits: Mapping[str, Mapping[str, Any]], sample: int, wall_s: float) -> str:
    cols = list(t.columns)
    lines = [f"MAPE % per class, M band and GPU, at most {sample} fitted rows per class and GPU "
             f"(stratified, fixed seed); {wall_s / 60:.1f} min on this machine.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(c, r[c]) for c in cols) + " |" for r in t.to_dict("records")]
    lines += ["", "Fitted constants per fold (`-X`: X left out):", "",
              "| class | fold | simulator constants | per-call costs (us) | not fitted (no row responds) |",
              "|---|---|---|---|---|"]
    for cls, by_fold in fits.items():
        for fold, f in by_fold.items():
            params = ", ".join(f"{k} {v:.4g}" for k, v in sorted(f.params.items()))
            proto = ", ".join(f"{k} {v:.2f}" for k, v in sorted(f.protocol_us.items()))
            lines.append(f"| {cls} | {fold} | {params} | {proto} | {', '.join(f.screened_out)} |")
    return "\n".join(lines)


def write_doc(doc: Path, t: pd.DataFrame, fits: Mapping[str, Mapping[str, Any]], sample: int,
              wall_s: float) -> Path:
    return write_block(doc, BEGIN, END, HEADING, markdown(t, fits, sample, wall_s))
