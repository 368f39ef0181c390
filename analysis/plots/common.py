"""What every figure shares: the Agg backend, one look, fixed colours per op class and policy, saving.

Figures are written as PNG, SVG or both, chosen by the output suffix (no suffix: both).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")  # files only; never a window
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import write_figure_atomic

P = ParamSpec("P")
R = TypeVar("R")
SUFFIXES = (".png", ".svg")
OP_COLORS = {
    "gemm": "#1f77b4", "attention": "#d62728", "kv_quant": "#9467bd", "norm": "#2ca02c",
    "rope": "#ff7f0e", "act": "#8c564b", "embed": "#7f7f7f", "sample": "#e377c2", "other": "#bcbd22",
}
MEMORY_COLORS = {"weights": "#1f77b4", "KV cache": "#ff7f0e", "activations": "#2ca02c"}
STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
    "figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight",
}


def styled(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a figure function under the project's rc settings (without changing the global ones)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with plt.rc_context(STYLE):
            return fn(*args, **kwargs)

    return wrapper


def new_axes(rows: int, cols: int, size: tuple[float, float],
             **kw: object) -> tuple[Figure, list[list[Axes]]]:
    """A figure of rows x cols panels (always a 2-D list), `size` the whole figure in inches."""
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, **kw)  # type: ignore[arg-type]
    return fig, [list(row) for row in axes]


def policy_colors(policies: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A stable colour per policy, in the order given (fp16 always grey)."""
    palette = [c for i, c in enumerate(plt.get_cmap("tab20").colors) if i not in (14, 15)]
    ordered = palette[0::2] + palette[1::2]  # the strong tones first, then their light twins
    others = [p for p in policies if p != "fp16"]
    out: dict[str, tuple[float, ...]] = {p: tuple(ordered[i % len(ordered)]) for i, p in enumerate(others)}
    out["fp16"] = (0.45, 0.45, 0.45)
    return out


def output_paths(out: str | Path) -> list[Path]:
    """`fig.png` -> [fig.png]; `fig.svg` -> [fig.svg]; `fig` -> [fig.png, fig.svg]."""
    path = Path(out)
    if path.suffix == "":
        return [path.with_suffix(s) for s in SUFFIXES]
    if path.suffix.lower() not in SUFFIXES:
        raise MpsimInputError(f"{out}: figure suffix must be one of {', '.join(SUFFIXES)} "
                              "(or none for both)")
    return [path]


def save(fig: Figure, out: str | Path) -> list[Path]:
    paths = output_paths(out)
    try:
        for p in paths:
            write_figure_atomic(fig, p)
    finally:
        plt.close(fig)
    return paths


def require_columns(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise MpsimInputError(f"{what}: the table lacks column(s) {', '.join(missing)}; it has "
                              f"{', '.join(map(str, table.columns))}")
    if table.empty:
        raise MpsimInputError(f"{what}: the table has no rows (only the header); nothing to draw")


def workload_label(prompt_len: int, gen_len: int, batch: int) -> str:
    return f"prompt {prompt_len}, {gen_len} new, batch {batch}"


WORKLOAD = ["prompt_len", "gen_len", "batch"]


def workloads(data: pd.DataFrame) -> list[tuple[int, int, int]]:
    """The table's (prompt_len, gen_len, batch) workloads, in order of first appearance."""
    return list(dict.fromkeys(data[WORKLOAD].itertuples(index=False, name=None)))


def panel_rows(data: pd.DataFrame, load: tuple[int, int, int], column: str, value: str) -> pd.DataFrame:
    """The rows of one chart panel: one workload and one value of `column` (a model or a device)."""
    return data[(data[column] == value) & (data[WORKLOAD].apply(tuple, axis=1) == load)]


def cell(sel: pd.DataFrame, column: str, **where: str) -> float:
    """`column` of the first row matching every `where` (column=value), NaN when none does."""
    mask = pd.Series(True, index=sel.index)
    for key, value in where.items():
        mask &= sel[key] == value
    hit = sel.loc[mask, column]
    return float(hit.iloc[0]) if len(hit) else float("nan")


def pick_perf_model(table: pd.DataFrame, perf_model: str | None) -> str:
    """The perf model to draw: the one asked for, else the simulator's if present, else the only one."""
    have = list(dict.fromkeys(table["perf_model"]))
    if perf_model is not None:
        if perf_model not in have:
            raise MpsimInputError(f"perf model {perf_model!r} is not in the table; it has {', '.join(have)}")
        return perf_model
    return "sim" if "sim" in have else have[0]
