"""Markdown of the every-stack report (stacks.py): the `stacks` and `stacks-kernels` blocks of
docs/validation.md.

`stacks`: per GPU x stack x class (x M band for GEMMs, then `all`): the sampled rows, how many the
model cannot represent (and the commonest reason), the simulator's MAPE, p90 and bias, the
roofline's MAPE, the efficiency roofline's MAPE with the stack its constants were fitted on, and
whether the simulator beats both. `stacks-kernels`: per GPU x stack x class x `kernel_source`, the
rows of the selection, of the sample, and priced.
"""

from __future__ import annotations

import pandas as pd

from mpsim.analysis.validation.metrics import BAND_ORDER, error_stats
from mpsim.analysis.validation.report_md import _table
from mpsim.analysis.validation.sampling import MIN_PER_STRATUM, SEED

BLOCKS = ("stacks", "stacks-kernels")
UNREPRESENTABLE = "unrepresentable: "


def _pct(v: float) -> str:
    return "–" if v != v else f"{v:.1f}"


def _cell(text: str, width: int = 70) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= width else text[:width - 1] + "…"


def unrepresentable(g: pd.DataFrame) -> tuple[int, str]:
    """(rows whose status is `unrepresentable: ...`, the commonest reason or '')."""
    s = g["status"].astype(str)
    hit = s[s.str.startswith(UNREPRESENTABLE)].str.slice(len(UNREPRESENTABLE))
    if hit.empty:
        return 0, ""
    top = hit.value_counts()
    top = top[top == top.iloc[0]].sort_index()  # ties: the first reason by name
    return len(hit), str(top.index[0])


def _parts(cls: str, g: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    bands = [b for b in BAND_ORDER if b in set(g["band"])]
    per_band = [(b, g[g["band"] == b]) for b in bands] if cls.startswith("gemm") and len(bands) > 1 else []
    return [*per_band, ("all", g)]


def _line(gpu: str, stack: str, cls: str, band: str, g: pd.DataFrame) -> list[str]:
    ok = g[g["status"] == "ok"]
    y = ok["measured_us"].to_numpy(dtype=float)
    sim = error_stats(ok["predicted_us"].to_numpy(dtype=float), y)
    roof = error_stats(ok["roofline_us"].to_numpy(dtype=float), y)["mape_pct"]
    eff = error_stats(ok["effroof_us"].to_numpy(dtype=float), y)["mape_pct"]
    n_bad, reason = unrepresentable(g)
    src = sorted(set(ok["effroof_from"].astype(str)))
    beats = "–" if not len(ok) else ("yes" if sim["mape_pct"] < min(roof, eff) else "**no**")
    other = int(((g["status"] != "ok") & ~g["status"].astype(str).str.startswith(UNREPRESENTABLE)).sum())
    return [gpu.upper().replace("_", " "), stack, cls, band, str(len(g)), str(n_bad),
            _cell(reason) + (f" (+{other} not priced: simulator error)" if other else ""),
            str(len(ok)), _pct(sim["mape_pct"]), _pct(sim["p90_pct"]),
            "–" if sim["bias_pct"] != sim["bias_pct"] else f"{sim['bias_pct']:+.1f}", _pct(roof),
            _pct(eff), ", ".join(src) or "–", beats]


def stacks_block(rows: pd.DataFrame, sample: int, skipped_gpus: list[str]) -> str:
    body = []
    for (gpu, stack, cls), g in rows.groupby(["gpu", "stack", "cls"], sort=True):
        for band, part in _parts(str(cls), g):
            body.append(_line(str(gpu), str(stack), str(cls), band, part))
    head = ["GPU", "stack", "class", "M band", "rows", "unrepr.", "top reason", "priced",
            "sim MAPE", "p90", "bias", "roofline MAPE", "eff. roofline MAPE", "eff. fitted on",
            "beats both"]
    priced = int((rows["status"] == "ok").sum())
    tables = rows.groupby(["gpu", "stack", "table"]).ngroups
    note = (f"Sample: at most **{sample} rows per table** of the `stacks` selection, stratified by "
            f"class x M band x dtype x kernel_source (at least {MIN_PER_STRATUM} per stratum, seed "
            f"{SEED}); {len(rows)} rows sampled from {tables} tables, {priced} priced. Errors in %; "
            "`rows` counts the sampled rows of the class (band), `unrepr.` those the model has no "
            "kernel for.")
    if skipped_gpus:
        note += f" Not priced (no hardware file): {', '.join(skipped_gpus)}."
    return note + "\n\n" + _table(head, body)


def kernels_block(rows: pd.DataFrame, counts: pd.DataFrame) -> str:
    keys = ["gpu", "stack", "cls", "kernel_source"]
    sampled = rows.groupby(keys).size().rename("sampled")
    priced = rows[rows["status"] == "ok"].groupby(keys).size().rename("priced")
    t = counts.groupby(keys)["selected"].sum().to_frame().join(sampled).join(priced).fillna(0)
    body = [[str(gpu).upper().replace("_", " "), str(stack), str(cls), f"`{src}`" if src else "–",
             str(int(r.selected)), str(int(r.sampled)), str(int(r.priced))]
            for (gpu, stack, cls, src), r in t.sort_index().iterrows()]
    return _table(["GPU", "stack", "class", "kernel_source", "selected", "sampled", "priced"], body)


def render(rows: pd.DataFrame, counts: pd.DataFrame, sample: int,
           skipped_gpus: list[str] | None = None) -> dict[str, str]:
    return {"stacks": stacks_block(rows, sample, skipped_gpus or []),
            "stacks-kernels": kernels_block(rows, counts)}
