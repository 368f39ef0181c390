"""Regenerate docs/validation.md: every class on both GPUs, simulator vs roofline vs the fitted
efficiency roofline, the bars of issue 11, scatter plots, calibration across devices, timings.

    python -m mpsim.analysis.validation.report [--groundtruth ../shared/groundtruth]
        [--doc docs/validation.md] [--figures docs/figures] [--fit-rows 300] [--skip-timing]

One command refreshes every number and figure: the tables are written between the
`<!-- validation:NAME -->` ... `<!-- /validation:NAME -->` markers of the doc (prose outside the
markers is kept), the figures to docs/figures/validation-{h200,h100}.png. Rows come from the
published files read in place with the `issue11` selection (selections.py); the predictions go
through the same code as `mpsim validate --against` with the shipped defaults.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.plots.validation import plot_scatter
from mpsim.analysis.validation.against import validate_against
from mpsim.analysis.validation.calibration import calibrate_rows, cross_device
from mpsim.analysis.validation.measured import Measurements
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.report_md import Report, check_doc, render, write_doc
from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import read_measurements
from mpsim.hw_models.loader import load_hardware
from mpsim.sim import DEFAULT_CACHE

GPUS = {"h200": ("h200_sxm", "h200-sxm"), "h100": ("h100_sxm", "h100-sxm")}
FILES = {  # (gpu, path under aiconfigurator/<gpu dir>/ or vidur/)
    "gemm": "gemm/vllm/0.24.0/gemm_perf.parquet",
    "gemm_second_run": "gemm/trtllm/1.3.0rc20/gemm_perf.parquet",
    "decode": "attention/vllm/0.24.0/generation_attention_perf.parquet",
    "prefill": "attention/vllm/0.24.0/context_attention_perf.parquet",
}
WO_FILE = "h200_sxm/gemm/trtllm/1.2.0rc5/gemm_perf.parquet"
VIDUR_FILES = ("h100/meta-llama/Llama-2-7b-hf/mlp.csv", "h100/meta-llama/Llama-2-70b-hf/mlp.csv")
SLOW_NOTE = "a smaller sample for a quicker report"
CALIBRATION_SETS = ("gemm", "decode", "prefill")  # the classes both GPUs share
KEEP = ("gpu", "source", "cls", "band", "m", "n", "k", "batch", "q_len", "kv_len", "heads",
        "kv_heads", "tokens", "hidden", "measured_us", "predicted_us", "roofline_us", "t_math_us",
        "t_mem_us", "status", "protocol")


def _say(text: str) -> None:
    print(f"[validation report] {text}", file=sys.stderr, flush=True)


def sample_rows(m: Measurements, limit: int, why: str) -> Measurements:
    """At most `limit` of the selected rows, evenly spaced in file order (0: all); the rest skipped."""
    ok = np.flatnonzero((m.rows["status"] == "ok").to_numpy())
    if limit <= 0 or len(ok) <= limit:
        return m
    keep = ok[np.linspace(0, len(ok) - 1, limit).round().astype(int)]
    rows = m.rows.copy()
    drop = np.setdiff1d(ok, keep)
    rows.loc[drop, "status"] = f"skipped: sample of {limit} ({why})"
    return Measurements(m.source, m.input, rows, m.notes)


def _validate(path: Path, gpu: str, source: str, cache_dir: str | Path | None,
              limit: int = 0) -> pd.DataFrame:
    _say(f"{gpu} {source}: {path.name}")
    m = apply_selection(read_measurements(path), "issue11")
    m = sample_rows(m, limit, SLOW_NOTE)
    r = validate_against(m, load_hardware(GPUS[gpu][1]), cache_dir=cache_dir)
    frame = r.frame.assign(gpu=gpu, source=source)
    return frame[[c for c in KEEP if c in frame.columns]]


def collect(gt: Path, cache_dir: str | Path | None, prefill_rows: int = 0) -> pd.DataFrame:
    """Every issue-11 selection predicted with the shipped defaults (rows outside: dropped here;
    prefill: `prefill_rows` evenly spaced rows per GPU, 0 = all)."""
    parts = []
    for gpu, (folder, _) in GPUS.items():
        for name in ("gemm", "decode", "prefill"):
            parts.append(_validate(gt / "aiconfigurator" / folder / FILES[name], gpu, name, cache_dir,
                                   prefill_rows if name == "prefill" else 0))
    parts.append(_validate(gt / "aiconfigurator" / WO_FILE, "h200", "wo", cache_dir))
    for f in VIDUR_FILES:
        parts.append(_validate(gt / "vidur" / f, "h100", "vidur", cache_dir))
    rows = pd.concat(parts, ignore_index=True)
    rows = rows[~rows["status"].str.startswith("skipped: outside")]
    wo_bf16 = (rows["source"] == "wo") & (rows["cls"] == "gemm bf16")  # bf16 of that file: not a class
    return rows[~wo_bf16].reset_index(drop=True)


def add_effroof(rows: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, float]]:
    """Per class: the 3 constants fitted on each GPU's rows and applied to every GPU (columns
    effroof_<fit gpu>); a class measured on one GPU only is fitted on its own rows (in-sample)."""
    fits: dict[tuple[str, str], tuple[float, float, float]] = {}
    ok = rows["status"] == "ok"
    for fit_gpu in GPUS:
        col = f"effroof_{fit_gpu}"
        rows[col] = np.nan
        for cls, g in rows[ok].groupby("cls"):
            single = g["gpu"].nunique() == 1
            src = g if single else g[g["gpu"] == fit_gpu]
            key = (str(cls), f"own rows ({g['gpu'].iloc[0].upper()})" if single else fit_gpu)
            if key not in fits:
                fits[key] = fit_eff_roofline(src["t_math_us"], src["t_mem_us"], src["measured_us"])
            rows.loc[g.index, col] = eff_roofline(g["t_math_us"], g["t_mem_us"], *fits[key])
    return fits


def noise_floor(gt: Path) -> pd.DataFrame:
    """The same bf16 GEMM shapes timed by two collectors (vLLM vs TRT-LLM files): their MAPE."""
    out = []
    for gpu, (folder, _) in GPUS.items():
        a = apply_selection(read_measurements(gt / "aiconfigurator" / folder / FILES["gemm"]), "issue11")
        b = apply_selection(read_measurements(gt / "aiconfigurator" / folder / FILES["gemm_second_run"]),
                            "issue11")
        key = ["m", "n", "k"]
        x = a.rows[a.rows["status"] == "ok"][[*key, "measured_us"]]
        y = b.rows[b.rows["status"] == "ok"][[*key, "measured_us"]]
        j = x.merge(y, on=key, suffixes=("_vllm", "_trt"))
        e = np.abs(j["measured_us_trt"] - j["measured_us_vllm"]) / j["measured_us_vllm"]
        out.append({"gpu": gpu, "shapes": len(j), "mape_pct": 100 * e.mean(),
                    "median_pct": 100 * e.median(), "p90_pct": 100 * e.quantile(0.9)})
    return pd.DataFrame(out)


def calibrate_both(rows_by_gpu: dict[str, pd.DataFrame], fit_rows: int, test_rows: int
                   ) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, str]]:
    """Fit on one GPU's rows (all its classes), predict the other: both directions."""
    out, consts = {}, {}
    for fit_gpu, other in (("h200", "h100"), ("h100", "h200")):
        hw = load_hardware(GPUS[fit_gpu][1])
        report = calibrate_rows(rows_by_gpu[fit_gpu], hw, fit_rows=fit_rows, test_rows=test_rows)
        report.errors[f"cross_device {other}"] = cross_device(
            rows_by_gpu[other], load_hardware(GPUS[other][1]), report, test_rows=test_rows)
        out[fit_gpu] = report.errors
        c = report.after
        consts[fit_gpu] = (f"bandwidth fraction {c.bandwidth_fraction:.3f}, L2 "
                           f"{c.l2_bytes_per_clock_per_sm:.1f} B/clk/SM, dequant x{c.dequant_scale:.2f}, "
                           + ", ".join(f"{k} {v:.2f} us" for k, v in sorted(c.protocol_us.items())))
    return out, consts


def _calibration_rows(gt: Path) -> dict[str, pd.DataFrame]:
    """The normalized rows of the classes both GPUs share that calibration re-simulates."""
    out = {}
    for gpu, (folder, _) in GPUS.items():
        parts = [apply_selection(read_measurements(gt / "aiconfigurator" / folder / FILES[n]),
                                 "issue11").rows for n in CALIBRATION_SETS]
        out[gpu] = pd.concat(parts, ignore_index=True)
    return out


def time_full_file(gt: Path) -> dict[str, float]:
    """`validate --against` of the H200 vLLM GEMM file with the issue-11 selection: a cold memo
    (and best-config cache), then warm."""
    path = gt / "aiconfigurator" / GPUS["h200"][0] / FILES["gemm"]
    hw = load_hardware("h200-sxm")
    out = {}
    with tempfile.TemporaryDirectory() as memo:
        for label in ("cold", "warm"):
            start = time.perf_counter()
            r = validate_against(apply_selection(read_measurements(path), "issue11"), hw, cache_dir=memo)
            out[f"gemm_perf.parquet, issue-11 selection ({int((r.frame['status'] == 'ok').sum())} "
                f"of {len(r.frame)} rows predicted), {label} memo"] = time.perf_counter() - start
    return out


def build(gt: Path, figures: Path, fit_rows: int, test_rows: int, timing: bool,
          prefill_rows: int = 0, cache_dir: str | Path | None = DEFAULT_CACHE) -> Report:
    t0 = time.perf_counter()
    rows = collect(gt, cache_dir, prefill_rows)
    report = Report(rows)
    report.timings["predict every selected row, both GPUs"] = time.perf_counter() - t0
    report.skipped = int(rows["status"].str.startswith("skipped: sample").sum())
    rows = rows[~rows["status"].str.startswith("skipped")].reset_index(drop=True)
    report.rows = rows
    report.unpredicted = (rows[rows["status"] != "ok"].groupby(["gpu", "cls", "status"]).size()
                          .rename("rows").reset_index())
    report.effroof = add_effroof(rows)
    report.noise = noise_floor(gt)
    t1 = time.perf_counter()
    _say("calibrating (fit on one GPU, predict the other, both directions)")
    report.calibration, report.constants = calibrate_both(_calibration_rows(gt), fit_rows, test_rows)
    report.timings["calibrate both directions"] = time.perf_counter() - t1
    if timing:
        _say("timing the full-file validation (cold memo, then warm)")
        report.timings.update(time_full_file(gt))
    ok = rows[rows["status"] == "ok"]
    for gpu in GPUS:
        models = {"simulator": "predicted_us", "roofline": "roofline_us",
                  "efficiency roofline (3 constants fit on H200)": "effroof_h200"}
        plot_scatter(ok[ok["gpu"] == gpu], models, figures / f"validation-{gpu}.png",
                f"{gpu.upper()}: published measurements vs mpsim (shipped defaults)")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    root = Path(__file__).resolve().parents[2]
    p.add_argument("--groundtruth", type=Path, default=root.parent / "shared" / "groundtruth")
    p.add_argument("--doc", type=Path, default=root / "docs" / "validation.md")
    p.add_argument("--figures", type=Path, default=root / "docs" / "figures")
    p.add_argument("--fit-rows", type=int, default=120)
    p.add_argument("--test-rows", type=int, default=500)
    p.add_argument("--skip-timing", action="store_true", help="do not time the full-file validation")
    p.add_argument("--prefill-rows", type=int, default=0,
                   help="prefill rows per GPU, evenly spaced (0: all 4,007; N: " + SLOW_NOTE + ")")
    args = p.parse_args(argv)
    if not args.groundtruth.is_dir():
        raise SystemExit(f"no ground truth at {args.groundtruth} (docs/validation.md#the-data)")
    check_doc(args.doc)
    report = build(args.groundtruth, args.figures, args.fit_rows, args.test_rows, not args.skip_timing,
                   args.prefill_rows)
    write_doc(args.doc, render(report))
    print(f"wrote {args.doc} and {args.figures}/validation-{{h200,h100}}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
