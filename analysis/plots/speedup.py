"""Speedup over fp16, bars grouped by model, one bar per policy, one panel per hardware and workload.

The form of PMPD's NPU throughput figure: end-to-end tokens/s of each policy over fp16 on the same
model, hardware and workload, from a sweep's results table (one performance model at a time).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from mpsim.analysis.plots.common import (
    cell,
    new_axes,
    panel_rows,
    pick_perf_model,
    policy_colors,
    require_columns,
    save,
    styled,
    workload_label,
    workloads,
)
from mpsim.errors import MpsimInputError

NEEDS = ("model", "policy", "hw", "perf_model", "prompt_len", "gen_len", "batch", "speedup_vs_fp16")


@styled
def speedup_figure(table: pd.DataFrame, perf_model: str | None = None) -> Figure:
    require_columns(table, NEEDS, "speedup chart")
    pm = pick_perf_model(table, perf_model)
    data = table[table["perf_model"] == pm]
    if data["speedup_vs_fp16"].isna().all():
        raise MpsimInputError("speedup chart: no speedups in the table (the sweep needs an fp16 policy)")
    hws = list(dict.fromkeys(data["hw"]))
    loads = workloads(data)
    policies = [p for p in dict.fromkeys(data["policy"]) if p != "fp16"]
    colors = policy_colors(["fp16", *policies])
    fig, axes = new_axes(len(loads), len(hws), (4.6 * len(hws), 3.4 * len(loads) + 0.9), sharey="row")
    for r, load in enumerate(loads):
        for c, hw in enumerate(hws):
            sel = panel_rows(data, load, "hw", hw)
            _panel(axes[r][c], sel, policies, colors)
            axes[r][c].set_title(f"{hw} | {workload_label(*load)}")
        axes[r][0].set_ylabel("speedup over fp16\n(end-to-end tokens/s)")
    handles = [Patch(color=colors[p], label=p) for p in policies]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(policies), 9), frameon=False,
               title=f"policy (perf model: {pm}; dashed line: fp16 = 1)")
    fig.tight_layout(rect=(0, 0.11 if len(loads) == 1 else 0.07, 1, 1))
    return fig


def _panel(ax: Axes, sel: pd.DataFrame, policies: list[str], colors: dict[str, tuple[float, ...]]) -> None:
    models = list(dict.fromkeys(sel["model"]))
    width = 0.85 / max(1, len(policies))
    for i, pol in enumerate(policies):
        vals = [cell(sel, "speedup_vs_fp16", model=m, policy=pol) for m in models]
        x = np.arange(len(models)) + (i - (len(policies) - 1) / 2) * width
        ax.bar(x, vals, width, color=colors[pol], label=pol)
    ax.axhline(1.0, color="0.3", lw=1, ls="--")
    ax.set_xticks(np.arange(len(models)), models)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


@styled
def plot_speedup(table: pd.DataFrame, out: str | Path, perf_model: str | None = None) -> list[Path]:
    return save(speedup_figure(table, perf_model), out)
