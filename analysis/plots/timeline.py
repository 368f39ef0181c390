"""A timeline (Gantt) of a simulated run: one lane per op class, a readable window of it.

The window is one decode step (default: the first) or an explicit [start, start + width] in ms. The
upper panel shows the whole window; the lower one zooms into its first decoder layer, bars named by
module, so the order and relative cost of the ops of one layer read at a glance. Launches shorter
than 0.2% of a panel's span are drawn at that width so that they stay visible. Where launches
overlap (the NPU's step model: weights stream in while earlier operators run), a pale bar behind
each launch spans its busy interval (busy_start_s..busy_end_s), the solid bar its share of the
step (start_s..end_s).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from mpsim.analysis.plots.common import OP_COLORS, new_axes, require_columns, save, styled
from mpsim.errors import MpsimInputError

MIN_WIDTH = 0.002  # of the window: the narrowest bar drawn
NEEDS = ("op", "module", "phase", "step", "layer", "start_s", "end_s")


def select_window(launches: pd.DataFrame, step: int | None = None, start_ms: float | None = None,
                  window_ms: float | None = None) -> tuple[pd.DataFrame, str]:
    """The launches to draw and a phrase saying which they are."""
    require_columns(launches, NEEDS, "timeline chart")
    if start_ms is not None or window_ms is not None:
        lo = (start_ms or 0.0) / 1e3
        hi = lo + (window_ms if window_ms is not None else 1.0) / 1e3
        sel = launches[(launches["end_s"] > lo) & (launches["start_s"] < hi)]
        what = f"{lo * 1e3:g}-{hi * 1e3:g} ms"
    else:
        decode = launches[launches["phase"] == "decode"]
        if step is None:
            step = int(decode["step"].min()) if len(decode) else 0
        phase = "decode" if step > 0 else "prefill"
        sel = launches[(launches["phase"] == phase) & (launches["step"] == step)]
        what = f"decode step {step}" if step > 0 else "prefill"
    if sel.empty:
        raise MpsimInputError(f"timeline: no launches in {what} (the run has steps "
                              f"{int(launches['step'].min())}..{int(launches['step'].max())})")
    return sel, what


@styled
def timeline_figure(launches: pd.DataFrame, title: str, step: int | None = None,
                    start_ms: float | None = None, window_ms: float | None = None) -> Figure:
    sel, what = select_window(launches, step, start_ms, window_ms)
    fig, axes = new_axes(2, 1, (11.0, 7.2), gridspec_kw={"height_ratios": [1, 1.15]})
    ops = [op for op in OP_COLORS if op in set(sel["op"])]
    _lanes(axes[0][0], sel, ops, scale=1e3, labels=False)
    axes[0][0].set_xlabel("time since the start of the run (ms)")
    axes[0][0].set_title(f"{title}\n{what}: {len(sel)} launches, "
                         f"{(sel['end_s'].max() - sel['start_s'].min()) * 1e3:.3f} ms")
    layer_rows = sel[sel["layer"] >= 0]
    first = layer_rows[layer_rows["layer"] == layer_rows["layer"].min()] if len(layer_rows) else sel
    origin = first["start_s"].min()
    shifted = [c for c in ("start_s", "end_s", "busy_start_s", "busy_end_s") if c in first.columns]
    zoom = first.assign(**{c: first[c] - origin for c in shifted})
    _lanes(axes[1][0], zoom, [op for op in ops if op in set(zoom["op"])], scale=1e6, labels=True)
    axes[1][0].set_xlabel("time since the layer's first launch (µs)")
    layer = int(first["layer"].iloc[0])
    axes[1][0].set_title(f"zoom: decoder layer {layer} of {what}" if layer >= 0 else "zoom")
    handles = [Patch(color=OP_COLORS[op], label=op) for op in ops]
    fig.legend(handles=handles, loc="lower center", ncol=len(ops), frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def _lanes(ax: Axes, sel: pd.DataFrame, ops: list[str], scale: float, labels: bool) -> None:
    lane = {op: i for i, op in enumerate(ops)}
    span = float(sel["end_s"].max() - sel["start_s"].min()) * scale
    min_width = MIN_WIDTH * span  # launches far shorter than the window would be invisible
    for op, rows in sel.groupby("op", observed=True):
        spans = [(float(x), max(float(w), min_width)) for x, w in
                 zip(rows["start_s"] * scale, (rows["end_s"] - rows["start_s"]) * scale, strict=True)]
        y = lane[str(op)]
        if _overlapped(rows):
            lo = float(sel["start_s"].min()) * scale  # a prefetch may begin before the window
            busy = [(max(float(a), lo), float(b) - max(float(a), lo)) for a, b in zip(
                rows["busy_start_s"] * scale, rows["busy_end_s"] * scale, strict=True)]
            ax.broken_barh(busy, (y - 0.38, 0.76), facecolors=OP_COLORS[str(op)], alpha=0.25,
                           edgecolor="none")
        ax.broken_barh(spans, (y - 0.38, 0.76), facecolors=OP_COLORS[str(op)], edgecolor="white",
                       linewidth=0.3)
        if labels:
            for (x, w), module in zip(spans, rows["module"], strict=True):
                inside = w > 0.06 * span
                ax.text(x + w / 2 if inside else x + w + 0.004 * span, y, str(module), fontsize=7.5,
                        ha="center" if inside else "left", va="center",
                        color="white" if inside else "black")
    ax.set_yticks(range(len(ops)), ops)
    ax.set_ylim(-0.6, len(ops) - 0.4)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def _overlapped(rows: pd.DataFrame) -> bool:
    """Whether the rows carry busy intervals that differ from their shares (overlapped launches)."""
    if "busy_start_s" not in rows.columns or "busy_end_s" not in rows.columns:
        return False
    return bool((rows["busy_start_s"] < rows["start_s"] - 1e-12).any()
                or (rows["busy_end_s"] > rows["end_s"] + 1e-12).any())


@styled
def plot_timeline(launches: pd.DataFrame, title: str, out: str | Path, step: int | None = None,
                  start_ms: float | None = None, window_ms: float | None = None) -> list[Path]:
    return save(timeline_figure(launches, title, step, start_ms, window_ms), out)
