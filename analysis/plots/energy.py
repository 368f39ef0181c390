"""Energy per generated token, per policy and hardware: one panel per model and workload.

Read from a sweep's results table (one performance model at a time): bars of `j_per_token` (decode
energy, static power included) grouped by hardware, one colour per policy; the darker lower part of
each bar is the DRAM energy (`decode_dram_j_per_token`), so how much of a policy's saving comes from
streaming fewer bytes reads at a glance.
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

NEEDS = ("model", "policy", "hw", "perf_model", "prompt_len", "gen_len", "batch", "j_per_token")


@styled
def energy_figure(table: pd.DataFrame, perf_model: str | None = None) -> Figure:
    require_columns(table, NEEDS, "energy chart")
    pm = pick_perf_model(table, perf_model)
    data = table[table["perf_model"] == pm]
    if data["j_per_token"].isna().all():
        raise MpsimInputError("energy chart: no j_per_token in the table (hardware files without an "
                              "energy block, or a sweep made before energy columns existed)")
    models = list(dict.fromkeys(data["model"]))
    loads = workloads(data)
    policies = list(dict.fromkeys(data["policy"]))
    colors = policy_colors(policies)
    fig, axes = new_axes(len(loads), len(models), (5.0 * len(models), 3.6 * len(loads) + 0.9))
    for r, load in enumerate(loads):
        for c, model in enumerate(models):
            sel = panel_rows(data, load, "model", model)
            _panel(axes[r][c], sel, policies, colors)
            axes[r][c].set_title(f"{model} | {workload_label(*load)}")
        axes[r][0].set_ylabel("energy per generated token (J)")
    handles = [Patch(color=colors[p], label=p) for p in policies]
    handles.append(Patch(facecolor="none", edgecolor="0.2", hatch="///", label="of which DRAM"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 8), frameon=False,
               title=f"policy (perf model: {pm}; decode energy incl. static power)")
    fig.tight_layout(rect=(0, 0.12 if len(loads) == 1 else 0.07, 1, 1))
    return fig


def _panel(ax: Axes, sel: pd.DataFrame, policies: list[str], colors: dict[str, tuple[float, ...]]) -> None:
    hws = list(dict.fromkeys(sel["hw"]))
    width = 0.85 / max(1, len(policies))
    has_dram = "decode_dram_j_per_token" in sel.columns
    for i, pol in enumerate(policies):
        x = np.arange(len(hws)) + (i - (len(policies) - 1) / 2) * width
        total = [cell(sel, "j_per_token", hw=hw, policy=pol) for hw in hws]
        ax.bar(x, total, width, color=colors[pol], label=pol)
        if has_dram:
            dram = [cell(sel, "decode_dram_j_per_token", hw=hw, policy=pol) for hw in hws]
            ax.bar(x, dram, width, facecolor="none", edgecolor="0.2", hatch="///", linewidth=0)
    ax.set_xticks(np.arange(len(hws)), hws)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


@styled
def plot_energy(table: pd.DataFrame, out: str | Path, perf_model: str | None = None) -> list[Path]:
    return save(energy_figure(table, perf_model), out)
