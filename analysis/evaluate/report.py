"""Writing an evaluation: the table (Parquet + CSV), the switch-point table, the searches' choices
(JSON), the figures (analysis/evaluate/figures.py) and a Markdown rendering."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from mpsim.analysis.evaluate.figures import pareto_plot, quality_bits_plot
from mpsim.analysis.evaluate.run import Evaluation
from mpsim.traces.atomic import atomic_write, write_csv_atomic, write_text_atomic
from mpsim.traces.atomic_folder import atomic_folder

MARKDOWN_COLUMNS = {
    "label": "policy / scheduler", "detail": "detail", "avg_bits_pmpd": "bits (PMPD)",
    "avg_bits_mean": "bits (mean)", "rouge_l_bytes": "Rouge-L bytes", "rouge_l_words": "Rouge-L words",
    "agreement": "agree", "bits_per_byte": "bpb", "kept_vs_high": "kept vs high",
}
SPEED_COLUMNS = {"ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms", "tokens_per_s": "tok/s",
                 "speedup_vs_fp16": "x fp16", "speedup_vs_high": "x high"}


OUTPUT_FILES = ("evaluation.parquet", "evaluation.csv", "switch_points.csv", "choices.json", "pareto.png",
                "quality_vs_bits.png", "evaluation.md")


def write_evaluation(ev: Evaluation, out: str | Path) -> list[Path]:
    """The evaluation's files in `out`, which is replaced as a whole (never a mix of two runs)."""
    target = Path(out)
    with atomic_folder(target, OUTPUT_FILES) as folder:
        atomic_write(folder / "evaluation.parquet", lambda tmp: ev.table.to_parquet(tmp, index=False))
        write_csv_atomic(ev.table, folder / "evaluation.csv", index=False, float_format="%.6g")
        if not ev.switch_table.empty:
            write_csv_atomic(ev.switch_table, folder / "switch_points.csv", index=False,
                             float_format="%.6g")
        write_text_atomic(json.dumps(_jsonable(ev.choices | {"timings_s": ev.timings}), indent=2) + "\n",
                          folder / "choices.json")
        pareto_plot(ev.table, folder / "pareto.png")
        quality_bits_plot(ev.table, ev.switch_table, folder / "quality_vs_bits.png")
        write_text_atomic(markdown(ev) + "\n", folder / "evaluation.md")
        written = sorted(os.listdir(folder))
    return [target / name for name in OUTPUT_FILES if name in written]


def markdown(ev: Evaluation) -> str:
    t = ev.table
    first = t[t["hw"] == t["hw"].iloc[0]]
    refs = "rouge_l_ref_words" in first and first["rouge_l_ref_words"].notna().any()
    cols = MARKDOWN_COLUMNS | ({"rouge_l_ref_words": "Rouge-L vs refs (words)"} if refs else {})
    parts = ["Quality (test prompts):", "", _md(first, cols)]
    for hw, sel in t.groupby("hw", sort=False):
        where = f"{sel['speed_model'].iloc[0]} shapes, {sel['perf_model'].iloc[0]}"
        parts += ["", f"Speed on {hw} ({where}):", "",
                  _md(sel, {"label": "policy / scheduler", "avg_bits_pmpd": "bits (PMPD)"} | SPEED_COLUMNS)]
    if not ev.switch_table.empty:
        parts += ["", "Switch points on the test prompts:", "",
                  _md(ev.switch_table, {c: c for c in ev.switch_table.columns})]
    return "\n".join(parts)


def _md(t: pd.DataFrame, cols: dict[str, str]) -> str:
    lines = ["| " + " | ".join(cols.values()) + " |", "|" + "---|" * len(cols)]
    for _, row in t.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item"):
        return x.item()
    return x
