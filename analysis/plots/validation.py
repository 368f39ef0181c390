"""Simulated vs measured time per launch: a log-log scatter around y = x with +-10% and +-25% bands.

Reads a trace whose launches carry `measured_us` (an engine capture) and a hardware model; each launch
is predicted by the chosen performance model. The title gives the per-launch mean absolute percentage
error and the error on the whole run's time, the two numbers a simulator is judged by.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
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


def errors(frame: pd.DataFrame) -> tuple[float, float]:
    """(mean |predicted - measured| / measured over launches, relative error of the summed time)."""
    m, p = frame["measured_s"].to_numpy(), frame["predicted_s"].to_numpy()
    return float(np.mean(np.abs(p - m) / m)), float((p.sum() - m.sum()) / m.sum())


@styled
def validation_figure(frame: pd.DataFrame, title: str) -> Figure:
    require_columns(frame, NEEDS, "validation chart")
    frame = frame[(frame["measured_s"] > 0) & (frame["predicted_s"] > 0)]
    if frame.empty:
        raise MpsimInputError("validation chart: no launch with positive measured and predicted time")
    fig, axes = new_axes(1, 1, (7.0, 6.2))
    ax = axes[0][0]
    us = frame[["measured_s", "predicted_s"]] * 1e6
    lo, hi = float(us.min().min()) / 1.5, float(us.max().max()) * 1.5
    x = np.logspace(np.log10(lo), np.log10(hi), 50)
    for band, alpha in zip(BANDS, (0.25, 0.12), strict=True):
        ax.fill_between(x, x * (1 - band), x * (1 + band), color="tab:green", alpha=alpha, lw=0,
                        label=f"±{band:.0%}")
    ax.plot(x, x, color="0.2", lw=1, label="simulated = measured")
    for op, rows in frame.groupby("op", observed=True):
        ax.scatter(rows["measured_s"] * 1e6, rows["predicted_s"] * 1e6, s=14, alpha=0.6,
                   color=OP_COLORS.get(str(op), OP_COLORS["other"]), label=f"{op} ({len(rows)})")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="measured time per launch (µs)", ylabel="simulated time per launch (µs)")
    mape, total = errors(frame)
    ax.set_title(f"{title}\nper-launch MAPE {mape:.1%}; whole-run time error {total:+.1%}")
    ax.grid(which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


@styled
def plot_validation(frame: pd.DataFrame, title: str, out: str | Path) -> list[Path]:
    return save(validation_figure(frame, title), out)
