"""bf16 GEMM on every GPU of the ground truth, per M band: simulator vs roofline vs the three-constant
efficiency roofline fitted on the OTHER GPUs (issue 24's yardstick for a device the model was not
fitted on).

    python -m mpsim.analysis.validation.gemm_devices [--groundtruth ../shared/groundtruth]
        [--sample 300] [--cache-dir DIR] [--rows OUT.parquet] [--gpus h200_sxm,l40s]

Reads every `aiconfigurator/{gpu}/gemm/{framework}/{version}/gemm_perf.parquet` of a GPU with a
hardware file (stacks.py's walk), keeps the `stacks` selection's bfloat16 rows, prices a stratified
sample of at most `--sample` of them per table (sampling.py) with the shipped defaults (the same
code as `mpsim validate --against`), and prints a markdown table per GPU and M band over all its
stacks: sim MAPE, p90 of the absolute error, bias, the plain roofline's MAPE and the efficiency
roofline's, max(t_math/e_c, t_mem/e_m) + c with its three constants fitted on the priced rows of
the other GPUs. Prints the wall time. `--rows` keeps the priced rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.against import validate_against
from mpsim.analysis.validation.measured import BANDS, Measurements
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.sampling import stratified_sample
from mpsim.analysis.validation.selections import apply_selection
from mpsim.analysis.validation.sources import read_measurements
from mpsim.analysis.validation.stacks import find_tables, hardware_of
from mpsim.hw_models.loader import load_hardware
from mpsim.sim import DEFAULT_CACHE

DTYPE = "bfloat16"
BAND_ORDER = [label for _, label in BANDS] + [">8192"]


def bf16_only(m: Measurements) -> Measurements:
    """`m` with every row whose gemm_dtype is not bfloat16 skipped."""
    rows = m.rows.copy()
    other = m.input["gemm_dtype"].astype(str).to_numpy() != DTYPE
    rows.loc[rows.index[other], "status"] = f"skipped: not {DTYPE}"
    return Measurements(m.source, m.input, rows, m.notes)


def price(gt: Path, sample: int, cache_dir: str | Path | None, gpus: set[str] | None) -> pd.DataFrame:
    """The priced bf16 GEMM rows of every table (ok rows only), tagged with gpu and stack."""
    parts = []
    tables, _ = find_tables(gt)
    for t in tables:
        if t.family != "gemm" or (gpus and t.gpu not in gpus):
            continue
        m = bf16_only(apply_selection(read_measurements(t.path), "stacks"))
        r = validate_against(stratified_sample(m, sample), load_hardware(str(hardware_of(t.gpu))),
                             cache_dir=cache_dir)
        f = r.frame[r.frame["status"] == "ok"]
        parts.append(f.assign(gpu=t.gpu, stack=t.stack)[
            ["gpu", "stack", "band", "m", "n", "k", "measured_us", "predicted_us", "roofline_us",
             "t_math_us", "t_mem_us", "config"]])
    return pd.concat(parts, ignore_index=True)


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and M band: rows, sim MAPE / p90 / bias, roofline MAPE, efficiency roofline MAPE
    (constants fitted on the other GPUs)."""
    out = []
    for gpu, g in rows.groupby("gpu", sort=True):
        others = rows[rows["gpu"] != gpu]
        consts = fit_eff_roofline(others["t_math_us"], others["t_mem_us"], others["measured_us"])
        eff = eff_roofline(g["t_math_us"].to_numpy(), g["t_mem_us"].to_numpy(), *consts)
        meas = g["measured_us"].to_numpy()
        err = (g["predicted_us"].to_numpy() - meas) / meas * 100
        roof = np.abs(g["roofline_us"].to_numpy() - meas) / meas * 100
        effe = np.abs(eff - meas) / meas * 100
        bands = g["band"].astype(str).to_numpy()
        for band in [*BAND_ORDER, "all"]:
            sel = np.ones(len(g), bool) if band == "all" else bands == band
            if not sel.any():
                continue
            out.append({"GPU": gpu, "M band": band, "rows": int(sel.sum()),
                        "sim MAPE": np.mean(np.abs(err[sel])), "p90": np.percentile(np.abs(err[sel]), 90),
                        "bias": np.mean(err[sel]), "roofline MAPE": np.mean(roof[sel]),
                        "eff. roofline (other GPUs) MAPE": np.mean(effe[sel])})
    return pd.DataFrame(out)


def markdown(t: pd.DataFrame) -> str:
    cols = list(t.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for rec in t.to_dict("records"):
        cells = [f"{v:+.1f}" if c == "bias" else f"{v:.1f}" if isinstance(v, float) else str(v)
                 for c, v in rec.items()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=root.parent / "shared" / "groundtruth")
    p.add_argument("--sample", type=int, default=300, help="rows per table (stratified)")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE, help="the launch memo folder")
    p.add_argument("--rows", type=Path, default=None, help="write the priced rows here (Parquet)")
    p.add_argument("--gpus", default=None, help="comma-separated ground-truth GPU folders")
    a = p.parse_args(argv)
    if not (a.groundtruth / "aiconfigurator").is_dir():
        print(f"no aiconfigurator tables under {a.groundtruth}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    rows = price(a.groundtruth, a.sample, a.cache_dir, set(a.gpus.split(",")) if a.gpus else None)
    if a.rows is not None:
        rows.to_parquet(a.rows)
    print(markdown(table(rows)))
    print(f"\n{len(rows)} rows priced in {time.perf_counter() - start:.0f} s (sample {a.sample} per table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
