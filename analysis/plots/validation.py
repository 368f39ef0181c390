"""The one predicted-vs-measured scatter plot: log-log, one colour per group (op class or op), one
panel per model, y = x with the +-10% and +-25% bands shaded; each panel's title gives the mean
absolute percentage error per launch or row and the error on the summed time, the two numbers a
simulator is judged by.

`mpsim validate --plot` draws it per op class with a panel per model (simulator, roofline);
`mpsim plot --kind validation` draws a trace's measured launches (priced as validate prices them,
under the trace's protocol) or a table of op, measured_s, predicted_s, per op.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpsim.analysis.plots.common import OP_COLORS, new_axes, require_columns, save, styled
from mpsim.errors import MpsimInputError

NEEDS = ("op", "measured_s", "predicted_s")
BANDS = (0.10, 0.25)


def validation_frame(run: pd.DataFrame) -> pd.DataFrame:
    """From a trace run (rows + time_s): op, measured_s, predicted_s of the measured launches."""
    require_columns(run, ("op", "measured_us", "time_s"), "validation chart")
    measured = run[run["measured_us"].notna()]
    if measured.empty:
        raise MpsimInputError("validation chart: no launch of the trace has measured_us "
                              "(it needs an engine capture, not a synthesized trace)")
    return pd.DataFrame({"op": measured["op"].astype(str).to_numpy(),
                         "measured_s": measured["measured_us"].to_numpy(dtype=float) / 1e6,
                         "predicted_s": measured["time_s"].to_numpy(dtype=float)})


def errors(frame: pd.DataFrame, measured: str = "measured_s", predicted: str = "predicted_s"
           ) -> tuple[float, float]:
    """(mean |predicted - measured| / measured, relative error of the summed time)."""
    m, p = frame[measured].to_numpy(dtype=float), frame[predicted].to_numpy(dtype=float)
    return float(np.mean(np.abs(p - m) / m)), float((p.sum() - m.sum()) / m.sum())


def _colors(groups: list[str], by: str) -> dict[str, tuple[float, ...]]:
    import matplotlib.pyplot as plt

    if by == "op":
        return {g: OP_COLORS.get(g, OP_COLORS["other"]) for g in groups}
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    return {g: cmap(i % cmap.N) for i, g in enumerate(sorted(groups))}


def _panel(ax: Axes, frame: pd.DataFrame, col: str, by: str, colors: Mapping[str, tuple[float, ...]],
           lo: float, hi: float, label: str) -> None:
    x = np.logspace(np.log10(lo), np.log10(hi), 50)
    for band, alpha in zip(BANDS, (0.22, 0.10), strict=True):
        ax.fill_between(x, x * (1 - band), x * (1 + band), color="tab:green", alpha=alpha,
                        lw=0, label=f"±{band:.0%}")
    ax.plot(x, x, color="0.2", ls="--", lw=1, label="predicted = measured")
    # large groups first, so the small ones stay visible on top of them
    for group in frame[by].value_counts().index:
        g = frame[frame[by] == group]
        big = len(g) > 2000
        mape, _ = errors(g, "measured_us", col)
        ax.scatter(g["measured_us"], g[col], s=4 if big else 14, alpha=0.5 if big else 0.8,
                   color=colors[str(group)], lw=0, label=f"{group} ({len(g)}; MAPE {mape:.0%})")
    mape, total = errors(frame, "measured_us", col)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured (µs)",
           ylabel=f"{label} (µs)", title=f"{label}: MAPE {mape:.1%}; summed time {total:+.1%}")
    ax.grid(which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, markerscale=2)


@styled
def scatter_figure(frame: pd.DataFrame, models: Mapping[str, str], title: str, by: str = "cls") -> Figure:
    """`frame`: `by`, measured_us and each model's prediction column (`models`: label -> column)."""
    require_columns(frame, (by, "measured_us", *models.values()), "validation chart")
    keep = frame["measured_us"] > 0
    for col in models.values():
        keep &= frame[col].notna() & (frame[col] > 0)
    frame = frame[keep]
    if frame.empty:
        raise MpsimInputError("validation chart: no launch or row with positive measured and "
                              "predicted time")
    fig, axes = new_axes(1, len(models), (6.4 * len(models), 6.0))
    values = frame[["measured_us", *models.values()]].to_numpy(dtype=float)
    lo, hi = float(values.min()) / 1.5, float(values.max()) * 1.5
    colors = _colors(sorted({str(g) for g in frame[by]}), by)
    for ax, (label, col) in zip(axes[0], models.items(), strict=True):
        _panel(ax, frame, col, by, colors, lo, hi, label)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_scatter(frame: pd.DataFrame, models: Mapping[str, str], out: str | Path, title: str,
                 by: str = "cls") -> list[Path]:
    return save(scatter_figure(frame, models, title, by), out)


def plot_validation(frame: pd.DataFrame, title: str, out: str | Path) -> list[Path]:
    """A table of op, measured_s, predicted_s (validation_frame, or a user's), per op."""
    require_columns(frame, NEEDS, "validation chart")
    us = pd.DataFrame({"op": frame["op"].astype(str), "measured_us": frame["measured_s"] * 1e6,
                       "predicted_us": frame["predicted_s"] * 1e6})
    return plot_scatter(us, {"simulated": "predicted_us"}, out, title, by="op")
