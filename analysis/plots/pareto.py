"""Quality vs speedup: each policy a point, the Pareto front (no other policy both faster and better).

Reads any table with columns policy, speedup and a quality column (higher is better; e.g. Rouge-L
from an evaluation table joined with a sweep's speedups). One panel per model when the table has a
`model` column with several models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpsim.analysis.plots.common import new_axes, policy_colors, require_columns, save, styled
from mpsim.errors import MpsimInputError


def pareto_front(table: pd.DataFrame, x: str = "speedup", y: str = "quality") -> pd.Series:
    """True for the rows that no other row dominates (>= on both columns, > on one)."""
    xs, ys = table[x].to_numpy(dtype=float), table[y].to_numpy(dtype=float)
    ge = (xs[None, :] >= xs[:, None]) & (ys[None, :] >= ys[:, None])
    gt = (xs[None, :] > xs[:, None]) | (ys[None, :] > ys[:, None])
    dominated = (ge & gt).any(axis=1)
    return pd.Series(~dominated, index=table.index, name="on_front")


@styled
def pareto_figure(table: pd.DataFrame, quality: str = "quality", quality_label: str | None = None,
                  title: str = "quality vs speedup") -> Figure:
    require_columns(table, ("policy", "speedup", quality), "Pareto chart")
    data = table.dropna(subset=["speedup", quality])
    if data.empty:
        raise MpsimInputError(f"Pareto chart: no row has both speedup and {quality}")
    groups = list(dict.fromkeys(data["model"])) if "model" in data.columns else [None]
    colors = policy_colors(list(dict.fromkeys(data["policy"])))
    fig, axes = new_axes(1, len(groups), (5.6 * len(groups), 4.6))
    for ax, model in zip(axes[0], groups, strict=True):
        sel = data if model is None else data[data["model"] == model]
        _panel(ax, sel, quality, colors)
        ax.set_title(title if model is None else f"{model}: {title}")
        ax.set_ylabel(quality_label or quality)
    fig.tight_layout()
    return fig


def _panel(ax: Axes, sel: pd.DataFrame, quality: str, colors: dict[str, tuple[float, ...]]) -> None:
    front = pareto_front(sel, "speedup", quality)
    for (_, row), on in zip(sel.iterrows(), front, strict=True):
        ax.scatter(row["speedup"], row[quality], s=70 if on else 40, color=colors[row["policy"]],
                   edgecolors="black" if on else "none", zorder=3)
        ax.annotate(str(row["policy"]), (row["speedup"], row[quality]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    pts = sel[front.to_numpy()].sort_values("speedup")
    ax.plot(pts["speedup"], pts[quality], color="0.3", lw=1.2, ls="--",
            label="Pareto front", zorder=2)
    pad = 0.08 * max(1e-9, float(np.ptp(sel["speedup"].to_numpy(dtype=float))))
    ax.set_xlim(float(sel["speedup"].min()) - pad, float(sel["speedup"].max()) + 4 * pad)
    ax.set_xlabel("speedup over fp16 (tokens/s)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)


@styled
def plot_pareto(table: pd.DataFrame, out: str | Path, quality: str = "quality",
                quality_label: str | None = None) -> list[Path]:
    return save(pareto_figure(table, quality, quality_label), out)
