"""Predicted vs measured, log-log, one colour per op class: one panel per model, y = x dashed,
the +-10% and +-25% bands shaded. Written only when asked (`--plot`, the validation report)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from mpsim.traces.atomic import write_figure_atomic

BANDS = (0.10, 0.25)


def class_colors(classes: list[str]) -> dict[str, tuple[float, ...]]:
    cmap = plt.get_cmap("tab10" if len(classes) <= 10 else "tab20")
    return {c: cmap(i % cmap.N) for i, c in enumerate(sorted(classes))}


def _panel(ax: plt.Axes, frame: pd.DataFrame, col: str, colors: Mapping[str, tuple[float, ...]],
           lo: float, hi: float, title: str) -> None:
    x = np.logspace(np.log10(lo), np.log10(hi), 50)
    for band, alpha in zip(BANDS, (0.22, 0.10), strict=True):
        ax.fill_between(x, x * (1 - band), x * (1 + band), color="tab:green", alpha=alpha, lw=0,
                        label=f"±{band:.0%}")
    ax.plot(x, x, "k--", lw=1, label="predicted = measured")
    # large classes first, so the small ones stay visible on top of them
    for cls in frame["cls"].value_counts().index:
        g = frame[frame["cls"] == cls]
        mape = float(np.mean(np.abs(g[col] - g["measured_us"]) / g["measured_us"]))
        ax.scatter(g["measured_us"], g[col], s=4 if len(g) > 2000 else 14, alpha=0.5 if len(g) > 2000
                   else 0.8, color=colors[str(cls)], lw=0, label=f"{cls} ({len(g)}; MAPE {mape:.0%})")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured (µs)",
           ylabel="predicted (µs)", title=title)
    ax.grid(which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, markerscale=2)


def scatter(frame: pd.DataFrame, models: Mapping[str, str], path: str | Path, title: str) -> Path:
    """`frame`: cls, measured_us and the prediction columns of `models` (label -> column)."""
    path = Path(path)
    keep = frame["measured_us"] > 0
    for col in models.values():
        keep &= frame[col].notna() & (frame[col] > 0)
    frame = frame[keep]
    fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models), 5.8), squeeze=False)
    if frame.empty:
        axes[0][0].text(0.5, 0.5, "no predicted rows", ha="center")
    else:
        values = frame[["measured_us", *models.values()]].to_numpy(dtype=float)
        lo, hi = float(values.min()) / 1.5, float(values.max()) * 1.5
        colors = class_colors(sorted(set(frame["cls"])))
        for ax, (label, col) in zip(axes[0], models.items(), strict=True):
            _panel(ax, frame, col, colors, lo, hi, label)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        return write_figure_atomic(fig, path, dpi=110)
    finally:
        plt.close(fig)
