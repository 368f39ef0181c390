"""Error statistics per op class and M band, the side-by-side summary, and the efficiency roofline.

For predictions p and measurements y of one group of rows, with e = (p - y) / y:
count, MAPE = mean |e|, p90 = the 90th percentile of |e|, max |e|, bias = mean e (all in percent),
and Pearson r of log p against log y (log times, so microsecond and millisecond rows weigh alike).

The efficiency roofline is the honest baseline for "beats the roofline": max(t_math / e_c,
t_mem / e_m) + c with three constants fitted to minimize MAPE on one set of rows (Nelder-Mead in
log space from three starts), then applied unchanged to others.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mpsim.analysis.validation.search import nelder_mead

STAT_COLUMNS = ("count", "mape_pct", "p90_pct", "max_pct", "bias_pct", "pearson_r")
BAND_ORDER = ("1-16", "17-256", "257-8192", ">8192", "n/a", "all")


def error_stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    pred, meas = np.asarray(pred, dtype=float), np.asarray(meas, dtype=float)
    keep = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    pred, meas = pred[keep], meas[keep]
    if not len(pred):
        return {"count": 0, **{c: np.nan for c in STAT_COLUMNS[1:]}}
    e = (pred - meas) / meas
    a = np.abs(e)
    pos = pred > 0
    logs = (np.log(pred[pos]), np.log(meas[pos]))
    r = (float(np.corrcoef(*logs)[0, 1]) if pos.sum() > 2 and np.std(logs[0]) > 1e-9
         and np.std(logs[1]) > 1e-9 else np.nan)
    return {"count": len(e), "mape_pct": 100 * float(a.mean()),
            "p90_pct": 100 * float(np.quantile(a, 0.9)), "max_pct": 100 * float(a.max()),
            "bias_pct": 100 * float(e.mean()), "pearson_r": r}


def summary_table(frame: pd.DataFrame, models: Mapping[str, str]) -> pd.DataFrame:
    """Long table: one row per (class, band, model); band `all` is each class over every band,
    class `all classes` every row (when there is more than one class).

    `frame` needs `cls`, `band`, `measured_us` and the prediction columns named by `models`
    (label -> column); rows whose prediction is NaN (not ok) are left out of the statistics."""
    out = []
    for cls, g in frame.groupby("cls", sort=True):
        bands = [b for b in BAND_ORDER if b in set(g["band"])]
        for band in [*bands, "all"] if len(bands) > 1 else ["all"]:
            sel = g if band == "all" else g[g["band"] == band]
            for label, col in models.items():
                out.append({"cls": cls, "band": band, "model": label,
                            **error_stats(sel[col].to_numpy(), sel["measured_us"].to_numpy())})
    if frame["cls"].nunique() > 1:
        for label, col in models.items():
            out.append({"cls": "all classes", "band": "all", "model": label,
                        **error_stats(frame[col].to_numpy(), frame["measured_us"].to_numpy())})
    table = pd.DataFrame(out, columns=["cls", "band", "model", *STAT_COLUMNS])
    return table[table["count"] > 0].reset_index(drop=True)


def format_summary(table: pd.DataFrame) -> str:
    """The long table side by side: per class and band, each model's MAPE p90 max bias r."""
    if table.empty:
        return "(no rows could be predicted)"
    models = list(dict.fromkeys(table["model"]))
    head = f"{'class':28s} {'band':9s} {'count':>6s}" + "".join(
        f" | {m[:30]:>30s}" for m in models)
    sub = f"{'':28s} {'':9s} {'':6s}" + " | {:>5s} {:>5s} {:>6s} {:>6s} {:>5s}".format(
        "MAPE", "p90", "max", "bias", "r") * len(models)
    lines = [head, sub]
    for (cls, band), g in table.groupby(["cls", "band"], sort=False):
        g = g.set_index("model")
        line = f"{cls[:28]:28s} {band:9s} {int(g['count'].iloc[0]):6d}"
        for m in models:
            if m not in g.index:
                line += " | " + " " * 30
                continue
            s = g.loc[m]
            line += (f" | {s.mape_pct:5.1f} {s.p90_pct:5.1f} {s.max_pct:6.1f} {s.bias_pct:+6.1f} "
                     f"{s.pearson_r:5.3f}")
        lines.append(line)
    return "\n".join(lines) + "\n(errors in %; r: Pearson r of log times)"


def status_counts(status: pd.Series, cls: pd.Series) -> pd.DataFrame:
    """Rows that were not predicted, per class and reason."""
    frame = pd.DataFrame({"cls": cls.to_numpy(), "status": status.to_numpy()})
    frame = frame[frame["status"] != "ok"]
    return frame.groupby(["status", "cls"]).size().rename("rows").reset_index()


# ---- the 3-constant efficiency roofline --------------------------------------------------------

def eff_roofline(t_math: np.ndarray, t_mem: np.ndarray, e_c: float, e_m: float, c: float) -> np.ndarray:
    return np.maximum(np.asarray(t_math) / e_c, np.asarray(t_mem) / e_m) + c


def fit_eff_roofline(t_math: np.ndarray, t_mem: np.ndarray, meas: np.ndarray
                     ) -> tuple[float, float, float]:
    """(e_c, e_m, c_us) minimizing MAPE of max(t_math/e_c, t_mem/e_m) + c over the rows."""
    tm, tb, y = (np.asarray(v, dtype=float) for v in (t_math, t_mem, meas))
    keep = np.isfinite(tm) & np.isfinite(tb) & (y > 0)
    tm, tb, y = tm[keep], tb[keep], y[keep]

    def loss(x: np.ndarray) -> float:
        return float(np.mean(np.abs(eff_roofline(tm, tb, np.exp(x[0]), np.exp(x[1]), x[2]) - y) / y))

    best: tuple[np.ndarray, float] | None = None
    for x0 in ([np.log(0.8), np.log(0.8), 3.0], [np.log(0.5), np.log(0.5), 1.0],
               [np.log(1.0), np.log(0.9), 5.0]):
        x, v = nelder_mead(loss, np.asarray(x0), step=0.3)
        x, v = nelder_mead(loss, x, step=0.05)
        if best is None or v < best[1]:
            best = (x, v)
    assert best is not None
    return float(np.exp(best[0][0])), float(np.exp(best[0][1])), float(best[0][2])
