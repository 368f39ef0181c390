"""A roofline with each kernel class of a run as a point: arithmetic intensity vs achieved FLOP/s.

A kernel class is (op, module, phase): e.g. the decode QKV GEMMs of every layer and step together.
Its intensity is its FLOPs over its DRAM bytes; its achieved rate is its FLOPs over its time under the
chosen performance model. The ceilings are the hardware's DRAM bandwidth slope and its matrix (fp16)
and vector peaks. Marker area is the class's share of the run's time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from mpsim.analysis.plots.common import OP_COLORS, new_axes, require_columns, save, styled
from mpsim.hw_models.schema import HardwareSpec

NEEDS = ("op", "module", "phase", "flops", "bytes_read", "bytes_written", "time_s")
PHASE_MARKERS = {"prefill": "s", "decode": "o"}
LABEL_SHARE = 0.02  # name the classes that take at least this share of the time


def kernel_classes(launches: pd.DataFrame) -> pd.DataFrame:
    """Per (op, module, phase): FLOPs, bytes, time, intensity, achieved FLOP/s, share of time."""
    require_columns(launches, NEEDS, "roofline chart")
    df = launches.assign(module=launches["module"].fillna(launches["op"]).astype(str),
                         bytes=launches["bytes_read"] + launches["bytes_written"])
    g = df.groupby(["op", "module", "phase"], observed=True, sort=False)[["flops", "bytes", "time_s"]]
    cls = g.sum().reset_index()
    cls = cls[(cls["flops"] > 0) & (cls["time_s"] > 0)].copy()
    cls["intensity"] = cls["flops"] / cls["bytes"]
    cls["achieved_flops"] = cls["flops"] / cls["time_s"]
    cls["share"] = cls["time_s"] / float(df["time_s"].sum())
    return cls.reset_index(drop=True)


@styled
def roofline_figure(launches: pd.DataFrame, hw: HardwareSpec, title: str) -> Figure:
    cls = kernel_classes(launches)
    fig, axes = new_axes(1, 1, (8.5, 5.6))
    ax = axes[0][0]
    bw = hw.dram_bandwidth_Bps()
    x = np.logspace(np.log10(max(cls["intensity"].min() / 3, 1e-2)),
                    np.log10(max(cls["intensity"].max() * 3, 4 * hw.matrix_peak_flops("fp16") / bw)), 200)
    for peak, name, style in ((hw.matrix_peak_flops("fp16"), "matrix fp16", "-"),
                              (hw.vector_peak_flops(), "vector", "--")):
        ax.plot(x, np.minimum(peak, x * bw) / 1e12, color="0.2", ls=style, lw=1.2,
                label=f"{name} peak {peak / 1e12:.3g} TFLOP/s")
    for row in cls.itertuples(index=False):
        ax.scatter(row.intensity, row.achieved_flops / 1e12, s=30 + 900 * row.share,
                   color=OP_COLORS.get(row.op, OP_COLORS["other"]), marker=PHASE_MARKERS[row.phase],
                   alpha=0.8, edgecolors="black", linewidths=0.5, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.autoscale_view()
    _annotate(ax, _labels(cls), fig.dpi)
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{title}\nDRAM {bw / 1e9:.0f} GB/s; marker area = share of run time")
    ax.grid(which="major", alpha=0.3)
    ax.legend(handles=_legend(cls, ax), loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _labels(cls: pd.DataFrame) -> dict[tuple[float, float], str]:
    """One label per cluster of large classes that sit on the same spot (decode GEMVs all do)."""
    spots: dict[tuple[float, float], list[tuple[str, str, float]]] = {}
    big = cls[cls["share"] >= LABEL_SHARE].sort_values("share", ascending=False)
    for row in big.itertuples(index=False):
        here = (float(row.intensity), float(row.achieved_flops))
        near = next((k for k in spots if _close(k, here)), here)
        spots.setdefault(near, []).append((str(row.module), str(row.phase), float(row.share)))
    out = {}
    for spot, members in spots.items():
        phases = sorted({m[1] for m in members})
        names = ", ".join(m[0] for m in members)
        out[spot] = f"{names} ({'/'.join(phases)}, {sum(m[2] for m in members):.0%})"
    return out


def _annotate(ax: Axes, labels: dict[tuple[float, float], str], dpi: float) -> None:
    """Label points, moving a label up or down a line at a time until it overlaps no earlier one."""
    boxes: list[tuple[float, float, float, float]] = []
    for (xi, yi), text in labels.items():
        px, py = ax.transData.transform((xi, yi / 1e12)) * 72 / dpi  # in points
        width = 4.7 * len(text)  # 8-point text, about 4.7 points per character
        for dy in (-3, 9, -15, 21, -27, 33, -39, 45):
            box = (px + 9, py + dy - 2, px + 9 + width, py + dy + 10)
            if not any(_overlap(box, b) for b in boxes):
                break
        boxes.append(box)
        moved = {"arrowprops": {"arrowstyle": "-", "lw": 0.6, "color": "0.4"}} if dy != -3 else {}
        ax.annotate(text, (xi, yi / 1e12), textcoords="offset points", xytext=(9, dy), fontsize=8,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
                    **moved)  # type: ignore[arg-type]


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _close(a: tuple[float, float], b: tuple[float, float], tol: float = 0.12) -> bool:
    return bool(abs(np.log10(a[0] / b[0])) < tol and abs(np.log10(a[1] / b[1])) < tol)


def _legend(cls: pd.DataFrame, ax: Axes) -> list[Line2D]:
    roofs = list(ax.get_lines())
    ops = [Line2D([], [], ls="", marker="o", color=OP_COLORS.get(op, OP_COLORS["other"]), label=op)
           for op in dict.fromkeys(cls["op"])]
    phases = [Line2D([], [], ls="", marker=m, color="0.5", label=p) for p, m in PHASE_MARKERS.items()]
    return roofs + ops + phases


@styled
def plot_roofline(launches: pd.DataFrame, hw: HardwareSpec, title: str, out: str | Path) -> list[Path]:
    return save(roofline_figure(launches, hw, title), out)
