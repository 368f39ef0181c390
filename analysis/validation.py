"""Simulated vs measured launch times: errors per op class and a scatter plot, for the SimPy model
and the roofline baseline side by side.

Errors are over the launches that carry `measured_us`: MAPE (mean |pred - meas| / meas), the
maximum of that ratio, and Pearson's r between predicted and measured times, per op class and
over all launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim import DEFAULT_CACHE, simulate
from mpsim.traces.trace import Trace

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MODEL_LABELS = {"sim": "SimPy model", "roofline": "roofline"}


@dataclass
class Validation:
    table: pd.DataFrame            # model, op, launches, mape_pct, max_err_pct, pearson_r
    measured_s: np.ndarray         # measured launches only
    predicted_s: dict[str, np.ndarray]
    ops: np.ndarray


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def error_table(ops: np.ndarray, measured: np.ndarray, predicted: dict[str, np.ndarray]) -> pd.DataFrame:
    records = []
    for model, pred in predicted.items():
        for op in [*sorted(set(ops.tolist())), "all"]:
            sel = np.ones(len(ops), bool) if op == "all" else ops == op
            err = np.abs(pred[sel] - measured[sel]) / measured[sel]
            records.append({"model": model, "op": op, "launches": int(sel.sum()),
                            "mape_pct": float(err.mean() * 100), "max_err_pct": float(err.max() * 100),
                            "pearson_r": pearson(pred[sel], measured[sel])})
    return pd.DataFrame.from_records(records)


def validate_trace(trace: Trace, hw: HardwareSpec,
                   cache_dir: str | Path | None = DEFAULT_CACHE) -> Validation:
    rows = trace.rows
    has = rows["measured_us"].notna().to_numpy()
    if not has.any():
        raise MpsimInputError("the trace has no measured_us values: validation needs a captured trace "
                              "(measured times), not a synthesized one")
    measured = rows["measured_us"].to_numpy(dtype=float)[has] * 1e-6
    if (measured <= 0).any():
        raise MpsimInputError("measured_us must be > 0 for every measured launch")
    predicted = {m: simulate(trace, hw, m, cache_dir=cache_dir).launches["time_s"].to_numpy()[has]
                 for m in ("sim", "roofline")}
    ops = rows["op"].astype(str).to_numpy()[has]
    return Validation(error_table(ops, measured, predicted), measured, predicted, ops)


def scatter_plot(v: Validation, path: str | Path, title: str) -> Path:
    """Log-log simulated vs measured, one panel per model, colored by op class, y = x dashed."""
    path = Path(path)
    fig, axes = plt.subplots(1, len(v.predicted_s), figsize=(5.5 * len(v.predicted_s), 5), squeeze=False)
    for ax, (model, pred) in zip(axes[0], v.predicted_s.items(), strict=True):
        lo = min(v.measured_s.min(), pred.min()) * 1e6 / 1.5
        hi = max(v.measured_s.max(), pred.max()) * 1e6 * 1.5
        for op in sorted(set(v.ops.tolist())):
            sel = v.ops == op
            ax.scatter(v.measured_s[sel] * 1e6, pred[sel] * 1e6, s=10, alpha=0.6, label=op)
        ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
        row = v.table[(v.table["model"] == model) & (v.table["op"] == "all")].iloc[0]
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured (us)",
               ylabel="predicted (us)",
               title=f"{MODEL_LABELS.get(model, model)}: MAPE {row.mape_pct:.1f}%, r {row.pearson_r:.3f}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def format_table(table: pd.DataFrame) -> str:
    wide = table.pivot_table(index="op", columns="model", values=["mape_pct", "max_err_pct", "pearson_r"],
                             sort=False)
    wide.columns = [f"{m} {v.replace('_pct', ' %')}" for v, m in wide.columns]
    launches = table.groupby("op", sort=False)["launches"].first()
    return wide.assign(launches=launches).round(3).to_string()
