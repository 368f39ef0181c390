"""Serving charts: latency against request rate per policy, the highest rate meeting an SLO per
policy and hardware, and KV occupancy and batch size over the time of one run.

`serve_latency_figure` and `serve_capacity_figure` read a sweep's serve_results.parquet (one row per
(model, policy, hardware, rate)); `serve_timeline_figure` reads one run's iterations.parquet. An SLO
that no policy meets is drawn as such (a labelled empty panel), never as a blank chart.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from mpsim.analysis.plots.common import new_axes, policy_colors, require_columns, save, styled
from mpsim.analysis.sweep.serve import max_rates, slo_goal

LATENCY_NEEDS = ("model", "policy", "hw", "rate", "tpot_p50_s", "tpot_p99_s", "slo_tpot_s")
CAPACITY_NEEDS = ("model", "policy", "hw", "rate", "slo_met", "slo_ttft_s", "slo_tpot_s",
                  "throughput_rps", "tpot_p99_s", "ttft_p99_s")
TIMELINE_NEEDS = ("start_s", "time_s", "running", "waiting", "kv_occupancy", "preempted")
MS = 1e3


def _panels(table: pd.DataFrame) -> list[tuple[str, str]]:
    return list(dict.fromkeys(table[["model", "hw"]].itertuples(index=False, name=None)))


@styled
def serve_latency_figure(table: pd.DataFrame) -> Figure:
    """p50 (dashed) and p99 (solid) TPOT against the offered rate, a line per policy, a panel per
    (model, hardware); the TPOT SLO dotted when the table has one."""
    require_columns(table, LATENCY_NEEDS, "serve latency chart")
    panels = _panels(table)
    policies = list(dict.fromkeys(table["policy"]))
    colors = policy_colors(policies)
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    width = max(4.8 * cols, 7.5)
    fig, axes = new_axes(rows, cols, (width, 3.6 * rows + 0.9))
    for i, (model, hw) in enumerate(panels):
        ax = axes[i // cols][i % cols]
        sel = table[(table["model"] == model) & (table["hw"] == hw)]
        for pol in policies:
            p = sel[sel["policy"] == pol].sort_values("rate")
            ax.plot(p["rate"], p["tpot_p99_s"] * MS, "-o", color=colors[pol], ms=4)
            ax.plot(p["rate"], p["tpot_p50_s"] * MS, "--", color=colors[pol], lw=1)
        slo = sel["slo_tpot_s"].dropna()
        if len(slo):
            ax.axhline(float(slo.iloc[0]) * MS, color="0.2", ls=":", lw=1.2)
            ax.annotate(f"SLO {float(slo.iloc[0]) * MS:g} ms", (0.02, float(slo.iloc[0]) * MS),
                        xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
        _log_if_wide(ax, sel["rate"])
        ax.set_title(f"{model} on {hw}{_priced_by(sel)}")
        ax.set_xlabel("offered request rate (requests/s)")
        ax.set_ylabel("time per output token (ms)")
        ax.grid(alpha=0.3)
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    handles = [Line2D([], [], color=colors[p], marker="o", label=p) for p in policies]
    handles += [Line2D([], [], color="0.3", ls="-", label="p99"), Line2D([], [], color="0.3", ls="--",
                                                                           label="p50")]
    per_row = max(2, int(width / 1.6))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), per_row), frameon=False)
    legend_rows = -(-len(handles) // per_row)
    fig.tight_layout(rect=(0, (0.07 if rows == 1 else 0.035) * legend_rows + 0.02, 1, 1))
    return fig


def _priced_by(sel: pd.DataFrame) -> str:
    models = list(dict.fromkeys(sel["perf_model"])) if "perf_model" in sel.columns else []
    return f" ({', '.join(models)})" if models else ""


def _log_if_wide(ax: Axes, values: pd.Series) -> None:
    """A log axis for rates spanning 8x or more, ticked at the swept rates."""
    rates = sorted(set(float(v) for v in values))
    if rates[0] > 0 and rates[-1] / rates[0] >= 8:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(rates))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())


@styled
def serve_capacity_figure(table: pd.DataFrame) -> Figure:
    """The highest swept rate meeting the SLOs, a bar per policy grouped by hardware, a panel per
    model; "none" where no swept rate meets them; a panel saying so when no policy does."""
    require_columns(table, CAPACITY_NEEDS, "serve capacity chart")
    if table[["slo_ttft_s", "slo_tpot_s"]].isna().all().all():
        raise_no_slo()
    rates = max_rates(table)
    models = list(dict.fromkeys(rates["model"]))
    policies = list(dict.fromkeys(rates["policy"]))
    colors = policy_colors(policies)
    fig, axes = new_axes(1, len(models), (max(6.0, 1.2 * len(policies) * rates["hw"].nunique()) *
                                          len(models), 4.6))
    for ax, model in zip(axes[0], models, strict=True):
        sel = rates[rates["model"] == model]
        goal = slo_goal(sel.iloc[0])
        swept = ", ".join(f"{r:g}" for r in sorted(set(table.loc[table["model"] == model, "rate"])))
        by = _priced_by(table[table["model"] == model])
        ax.set_title(f"{model}{by}: highest rate meeting\n{goal}\n(rates swept: {swept} requests/s)",
                     fontsize=10)
        if sel["max_rate_rps"].isna().all():
            _nobody(ax, sel, goal)
            continue
        _bars(ax, sel, policies, colors)
    fig.tight_layout()
    return fig


def raise_no_slo() -> None:
    from mpsim.errors import MpsimInputError

    raise MpsimInputError("serve capacity chart: the table has no SLO (set slo_ttft_ms or slo_tpot_ms "
                          "in the spec's serve section)")


def _bars(ax: Axes, sel: pd.DataFrame, policies: list[str], colors: dict[str, tuple[float, ...]]) -> None:
    hws = list(dict.fromkeys(sel["hw"]))
    width = 0.85 / max(1, len(policies))
    top = float(np.nanmax(sel["max_rate_rps"]))
    for i, pol in enumerate(policies):
        for h, hw in enumerate(hws):
            hit = sel[(sel["hw"] == hw) & (sel["policy"] == pol)]
            if hit.empty:
                continue
            x = h + (i - (len(policies) - 1) / 2) * width
            value = float(hit["max_rate_rps"].iloc[0])
            if np.isnan(value):
                ax.text(x, top * 0.01, "none", rotation=90, ha="center", va="bottom", fontsize=8,
                        color=colors[pol])
                continue
            ax.bar(x, value, width, color=colors[pol], label=pol if h == 0 else None)
            ax.text(x, value, f"{value:g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(hws)), hws)
    ax.set_ylabel("requests/s (highest swept rate meeting the SLO)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(frameon=False, fontsize=8)


def _nobody(ax: Axes, sel: pd.DataFrame, goal: str) -> None:
    lines = [f"No policy meets {goal}", "at any swept rate.", ""]
    for r in sel.itertuples():
        lines.append(f"{r.policy} on {r.hw} at {r.lowest_rate:g}/s: p99 TPOT "
                     f"{r.lowest_rate_tpot_p99_s * MS:.1f} ms, TTFT {r.lowest_rate_ttft_p99_s * MS:.0f} ms")
    ax.text(0.5, 0.5, "\n".join(lines), ha="center", va="center", transform=ax.transAxes, fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])


@styled
def serve_timeline_figure(iterations: pd.DataFrame, title: str) -> Figure:
    """KV cache occupancy (top) and sequences running and waiting (bottom) over one run."""
    require_columns(iterations, TIMELINE_NEEDS, "serve timeline chart")
    fig, axes = new_axes(2, 1, (9.0, 5.2), sharex=True)
    t = iterations["start_s"].to_numpy()
    top, bottom = axes[0][0], axes[1][0]
    top.step(t, iterations["kv_occupancy"] * 100, where="post", color="#ff7f0e", lw=1)
    top.set_ylabel("KV blocks in use (%)")
    top.set_ylim(0, 105)
    bottom.step(t, iterations["running"], where="post", color="#1f77b4", lw=1, label="running")
    bottom.step(t, iterations["waiting"], where="post", color="0.5", lw=1, label="waiting")
    pre = iterations[iterations["preempted"] > 0]
    if len(pre):
        bottom.plot(pre["start_s"], pre["running"], "v", color="#d62728", ms=4, label="preemption")
    bottom.set_ylabel("sequences")
    bottom.set_xlabel("time (s)")
    bottom.legend(frameon=False, fontsize=8, loc="upper right")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.set_title(title)
    fig.tight_layout()
    return fig


def plot_serve_latency(table: pd.DataFrame, out: str | Path) -> list[Path]:
    return save(serve_latency_figure(table), out)


def plot_serve_capacity(table: pd.DataFrame, out: str | Path) -> list[Path]:
    return save(serve_capacity_figure(table), out)


def plot_serve_timeline(iterations: pd.DataFrame, title: str, out: str | Path) -> list[Path]:
    return save(serve_timeline_figure(iterations, title), out)
