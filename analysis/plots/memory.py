"""Memory per policy, stacked: weights, KV cache, peak activations; one panel per model and workload.

Read from a sweep's results table (memory does not depend on the hardware). Dotted lines mark the
memory of the swept devices that fall inside the panel's range, so "does it fit?" reads at a glance;
above each bar, the GPUs of each swept device the point needs (mpsim.memory.gpus_needed: the smallest
tensor-parallel size of 1/2/4/8 whose per-GPU share fits 90% of one GPU; ">8" when none does).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpsim.analysis.plots.common import (
    MEMORY_COLORS,
    WORKLOAD,
    new_axes,
    panel_rows,
    require_columns,
    save,
    styled,
    workload_label,
    workloads,
)
from mpsim.memory import gpus_needed, point_memory
from mpsim.models import ModelSpec, get_model
from mpsim.policy import parse_policy
from mpsim.workload import Workload

NEEDS = ("model", "policy", "prompt_len", "gen_len", "batch", "weights_bytes", "kv_cache_bytes",
         "peak_activation_bytes")
PARTS = {"weights": "weights_bytes", "KV cache": "kv_cache_bytes", "activations": "peak_activation_bytes"}
GB = 1e9


@styled
def memory_figure(table: pd.DataFrame, specs: Mapping[str, ModelSpec] | None = None) -> Figure:
    """`specs`: models by the names the table uses, for models that are not presets (a sweep spec's
    config.json); the GPU counts above the bars need each model's shapes."""
    require_columns(table, NEEDS, "memory chart")
    data = table.drop_duplicates(subset=["model", "policy", *WORKLOAD])
    models = list(dict.fromkeys(data["model"]))
    loads = workloads(data)
    capacity = _capacities(table)
    fig, axes = new_axes(len(loads), len(models), (5.2 * len(models), 3.6 * len(loads) + 0.6))
    for r, load in enumerate(loads):
        for c, model in enumerate(models):
            sel = panel_rows(data, load, "model", model)
            _panel(axes[r][c], sel, capacity, (specs or {}).get(model))
            axes[r][c].set_title(f"{model} | {workload_label(*load)}")
        axes[r][0].set_ylabel("memory (GB)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    note = ("above a bar: the GPUs of each device it needs (tensor-parallel 2/4/8, "
            "mpsim.memory.gpus_needed); no label: one of each fits") if capacity else None
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, title=note,
               title_fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def _capacities(table: pd.DataFrame) -> dict[str, float]:
    if "hw" not in table.columns or "hw_memory_bytes" not in table.columns:
        return {}
    caps = table.drop_duplicates("hw").set_index("hw")["hw_memory_bytes"]
    return {str(k): float(v) / GB for k, v in caps.items()}


def _panel(ax: Axes, sel: pd.DataFrame, capacity: dict[str, float], spec: ModelSpec | None) -> None:
    x = np.arange(len(sel))
    bottom = np.zeros(len(sel))
    for label, col in PARTS.items():
        vals = sel[col].to_numpy(dtype=float) / GB
        ax.bar(x, vals, 0.7, bottom=bottom, color=MEMORY_COLORS[label], label=label)
        bottom += vals
    top = float(bottom.max()) * 1.3
    for hw, gb in capacity.items():
        if gb <= top:
            ax.axhline(gb, color="0.25", lw=1, ls=":")
            ax.text(len(sel) - 0.5, gb, f" {hw} {gb:g} GB", va="bottom", ha="right", fontsize=8)
    if capacity:
        for i, (_, row) in enumerate(sel.iterrows()):
            ax.text(i, bottom[i], _gpus_label(row, capacity, spec), ha="center", va="bottom", fontsize=6)
    ax.set_ylim(0, top)
    ax.set_xticks(x, sel["policy"], rotation=35, ha="right")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _gpus_label(row: pd.Series, capacity: dict[str, float], spec: ModelSpec | None) -> str:
    """"N x hw" for each swept device on which one bar (a point of the table) needs more than one
    GPU; empty where one of every device holds it (the figure's note says so), so that the labels
    of neighbouring bars do not run into each other."""
    spec = spec or get_model(str(row["model"]))
    wl = Workload(int(row["prompt_len"]), int(row["gen_len"]), int(row["batch"]))
    mem = point_memory(spec, parse_policy(str(row["policy"])), wl)
    parts = []
    for hw, gb in capacity.items():
        n = gpus_needed(spec, mem, gb * GB)
        if n != 1:
            parts.append(f"{n if n else '>8'}x {hw}")
    return "\n".join(parts)


@styled
def plot_memory(table: pd.DataFrame, out: str | Path,
                models: Mapping[str, ModelSpec] | None = None) -> list[Path]:
    return save(memory_figure(table, models), out)
