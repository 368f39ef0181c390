"""The evaluation's two figures: quality vs speedup per hardware (with the Pareto front of
analysis/plots/pareto.py) and quality vs average bits, where the learned scheduler meets the random
ones and the fixed switch points on equal, hardware-free terms.

Many entries land close together (uniform high, phase-aware and a cautious scheduler are often the
same run), so identical points share one label and labels are placed to avoid each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpsim.analysis.plots.common import new_axes, policy_colors, require_columns, save, styled
from mpsim.analysis.plots.pareto import pareto_front
from mpsim.errors import MpsimInputError

QUALITY_LABEL = "Rouge-L (bytes) vs fp16, test prompts"
QUALITY_LABELS = {"rouge_l_bytes": QUALITY_LABEL, "rouge_l_words": "Rouge-L (words) vs fp16, test prompts"}
SPEED_LABELS = {"speedup_vs_fp16": "speedup over fp16 (tokens/s)",
                "speedup_vs_high": "speedup over uniform high (tokens/s)"}
EVALUATION_KEYS = ("label", "kind", "hw", "speed_model", "perf_model")  # what marks an evaluation table
OFFSETS = ((6, 4), (6, -11), (-6, 4), (-6, -11), (6, 15), (6, -22), (-6, 15), (-6, -22))  # points
FONT_PT = 8.0
MARK_PT = 5.0  # half-size of the box a marker keeps free of labels


def merged_labels(table: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """One row per distinct (x, y) point, its labels joined with ' = ' (identical runs overlap)."""
    key = table[x].round(9).astype(str) + "|" + table[y].round(9).astype(str)
    joined = table.groupby(key, sort=False)["policy"].agg(" = ".join)
    first = table.assign(_key=key).drop_duplicates("_key")
    return first.assign(policy=first["_key"].map(joined)).drop(columns="_key")


def spread_labels(ax: Axes, xs: Sequence[float], ys: Sequence[float], labels: Sequence[str]) -> None:
    """Annotate each point at the first offset whose text box misses the markers and the boxes
    already placed, preferring boxes inside the axes (display units; sizes converted from points)."""
    ax.figure.canvas.draw()  # fixes the axes' limits and size
    px_per_pt = ax.figure.dpi / 72.0
    marks = [ax.transData.transform((x, y)) for x, y in zip(xs, ys, strict=True)]
    m = MARK_PT * px_per_pt
    placed = [(mx - m, my - m, mx + m, my + m) for mx, my in marks]
    f = ax.bbox
    order = sorted(range(len(marks)), key=lambda j: (-marks[j][1], marks[j][0]))
    for j in order:
        (px, py), text = marks[j], labels[j]
        width, height = 0.55 * FONT_PT * len(text) * px_per_pt, 1.2 * FONT_PT * px_per_pt
        ranked = []
        for i, (dx, dy) in enumerate(OFFSETS):
            x0, y0 = px + dx * px_per_pt - (0 if dx > 0 else width), py + dy * px_per_pt
            box = (x0, y0, x0 + width, y0 + height)
            clash = any(_overlap(box, b) for b in placed)
            outside = not (f.x0 <= box[0] and box[2] <= f.x1 and f.y0 <= box[1] and box[3] <= f.y1)
            ranked.append((clash, outside, i, box))
        _, _, best, box = min(ranked)
        placed.append(box)
        dx, dy = OFFSETS[best]
        ax.annotate(text, (xs[j], ys[j]), textcoords="offset points",
                    xytext=(dx, dy), fontsize=FONT_PT, ha="left" if dx > 0 else "right")


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _pareto_panel(ax: Axes, sel: pd.DataFrame, quality: str, colors: dict[str, tuple[float, ...]]) -> None:
    front = pareto_front(sel, "speedup", quality).to_numpy()
    for (_, r), on in zip(sel.iterrows(), front, strict=True):
        ax.scatter(r["speedup"], r[quality], s=70 if on else 40, color=colors[r["policy"]],
                   edgecolors="black" if on else "none", zorder=3)
    pts = sel[front].sort_values("speedup")
    ax.plot(pts["speedup"], pts[quality], color="0.3", lw=1.2, ls="--", label="Pareto front")
    span = float(np.ptp(sel["speedup"].to_numpy(dtype=float))) or 1e-3
    ax.set_xlim(float(sel["speedup"].min()) - 0.1 * span, float(sel["speedup"].max()) + 0.35 * span)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    spread_labels(ax, list(sel["speedup"]), list(sel[quality]), list(sel["policy"]))


def is_evaluation_table(table: pd.DataFrame) -> bool:
    """A table `mpsim evaluate` wrote (evaluation.parquet/.csv): one row per entry and hardware."""
    return set(EVALUATION_KEYS) <= set(table.columns)


@styled
def pareto_figure(table: pd.DataFrame, quality: str = "rouge_l_bytes",
                  speedup: str = "speedup_vs_fp16") -> Figure:
    """Quality vs speedup, one panel per hardware; fp16 itself (1, 1) is left out so the
    quantized points spread over the axes. `quality` and `speedup`: columns of the table."""
    require_columns(table, (*EVALUATION_KEYS, quality, speedup), "Pareto chart of an evaluation table")
    data = table[table["label"] != "fp16"]
    data = data.drop(columns=[c for c in ("policy", "speedup") if c in data.columns and c != speedup])
    data = data.rename(columns={"label": "policy", speedup: "speedup"}).dropna(subset=["speedup", quality])
    if data.empty:
        raise MpsimInputError(f"Pareto chart: no entry other than fp16 has both {speedup} and {quality}")
    groups = list(data.groupby("hw", sort=False))
    fig, axes = new_axes(1, len(groups), (6.4 * len(groups), 5.0))
    for ax, (hw, sel) in zip(axes[0], groups, strict=True):
        merged = merged_labels(sel, "speedup", quality)
        _pareto_panel(ax, merged, quality, policy_colors(list(merged["policy"])))
        ax.set_xlabel(SPEED_LABELS.get(speedup, speedup))
        ax.set_ylabel(QUALITY_LABELS.get(quality, quality))
        ax.set_title(f"{hw} ({sel['speed_model'].iloc[0]} shapes, {sel['perf_model'].iloc[0]}): "
                     "quality vs speedup", fontsize=10)
    fig.tight_layout()
    return fig


@styled
def bits_figure(table: pd.DataFrame, switches: pd.DataFrame) -> Figure:
    first = table[(table["hw"] == table["hw"].iloc[0]) & (table["label"] != "fp16")]
    fig, axes = new_axes(1, 1, (7.6, 5.0))
    ax = axes[0][0]
    points = first.rename(columns={"label": "policy", "avg_bits_pmpd": "x", "rouge_l_bytes": "y"})
    colors = policy_colors(list(points["policy"]))
    ax.scatter(points["x"], points["y"], s=45, color=[colors[n] for n in points["policy"]], zorder=3)
    if not switches.empty:
        sw = switches.rename(columns={"scheduler": "policy", "avg_bits_pmpd": "x", "rouge_l": "y"})
        fixed = sw[sw["policy"].str.startswith("fixed S=")].sort_values("x")
        ax.plot(fixed["x"], fixed["y"], color="0.5", ls="--", marker="s", ms=4,
                label="every prompt at one S (0, L/3, 2L/3, L)", zorder=2)
        expected = sw[sw["policy"].str.endswith("(expected)")]
        ax.scatter(expected["x"], expected["y"], s=60, facecolors="none", edgecolors="black",
                   label="random, in expectation", zorder=3)
        fixed = fixed.assign(policy=fixed["policy"].str.removeprefix("fixed "))
        points = pd.concat([points[["policy", "x", "y"]], expected[["policy", "x", "y"]],
                            fixed[["policy", "x", "y"]]])
    rows = merged_labels(points, "x", "y")
    spread_labels(ax, list(rows["x"]), list(rows["y"]), list(rows["policy"]))
    ax.set_xlabel("average decode bits (PMPD count: passes 2..n)")
    ax.set_ylabel(QUALITY_LABEL)
    ax.set_title("quality vs bits on the test prompts", fontsize=10)
    ax.grid(alpha=0.3)
    if not switches.empty:  # the points are labelled in place; the legend names the switch curves
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def pareto_plot(table: pd.DataFrame, out: str | Path, quality: str = "rouge_l_bytes",
                speedup: str = "speedup_vs_fp16") -> list[Path]:
    return save(pareto_figure(table, quality, speedup), out)


def quality_bits_plot(table: pd.DataFrame, switches: pd.DataFrame, out: Path) -> list[Path]:
    return save(bits_figure(table, switches), out)
