"""The weight-only GEMM table per M band: TRT-LLM's int4_wo / int8_wo rows (aiconfigurator H200
trtllm 1.2.0rc5, TensorRT profiler, L2 cold), simulator vs roofline vs the efficiency roofline.

    python -m mpsim.analysis.validation.wo_bands [--groundtruth ../shared/groundtruth]
        [--per-band 200] [--seed 1] [--half test|fit|all] [--file F --hw NAME]

Rows are sampled stratified (at most `per-band` rows per dtype and M band, fixed seed) from one
half of the shapes: `fit` = (log2 n + log2 k) even, the half the fpA_intB constants were set on
(SimParams.trtllm.fpaintb_*), `test` = odd, out of sample. The efficiency roofline's three
constants are fitted per dtype on the sampled rows themselves (in sample, its best case).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.against import validate_against
from mpsim.analysis.validation.measured import Measurements
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.sources import read_measurements
from mpsim.hw_models.loader import load_hardware

WO_PATH = "aiconfigurator/h200_sxm/gemm/trtllm/1.2.0rc5/gemm_perf.parquet"
WO_BANDS = ((1, 4, "1-4"), (5, 16, "5-16"), (17, 256, "17-256"), (257, 1 << 30, "257+"))
DTYPES = ("int4_wo", "int8_wo")


def shape_half(n: pd.Series, k: pd.Series) -> np.ndarray:
    """0 (fit half) or 1 (test half) per row: parity of log2 n + log2 k, rounded."""
    return ((np.log2(n.to_numpy(float)).round() + np.log2(k.to_numpy(float)).round()) % 2).astype(int)


def sample_wo(m: Measurements, per_band: int, seed: int, half: str) -> Measurements:
    d, rows = m.input, m.rows.copy()
    ok = (rows["status"] == "ok").to_numpy() & d["gemm_dtype"].isin(DTYPES).to_numpy()
    if half != "all":
        ok &= shape_half(d["n"], d["k"]) == (0 if half == "fit" else 1)
    rng = np.random.default_rng(seed)
    keep = np.zeros(len(rows), dtype=bool)
    for dtype in DTYPES:
        for lo, hi, _ in WO_BANDS:
            cand = np.flatnonzero(ok & (d["gemm_dtype"] == dtype).to_numpy()
                                  & (d["m"] >= lo).to_numpy() & (d["m"] <= hi).to_numpy())
            keep[rng.choice(cand, min(per_band, len(cand)), replace=False)] = True
    rows.loc[~keep & (rows["status"] == "ok"), "status"] = f"skipped: wo sample of {per_band} per band"
    return Measurements(m.source, d, rows, m.notes)


def band_table(frame: pd.DataFrame, dtypes: pd.Series) -> pd.DataFrame:
    """MAPE (%) per dtype and M band of the ok rows: sim, its bias, roofline, efficiency roofline."""
    f = frame[frame["status"] == "ok"].assign(dtype=dtypes[frame["status"] == "ok"])
    f["wo_band"] = [next(b for lo, hi, b in WO_BANDS if lo <= m <= hi) for m in f["m"]]
    out = []
    for dtype, g0 in f.groupby("dtype"):
        fit = fit_eff_roofline(g0["t_math_us"], g0["t_mem_us"], g0["measured_us"])
        g0 = g0.assign(eff=eff_roofline(g0["t_math_us"], g0["t_mem_us"], *fit))
        for band, g in [*g0.groupby("wo_band"), ("all", g0)]:
            rel = (g[["predicted_us", "roofline_us", "eff"]].to_numpy()
                   - g[["measured_us"]].to_numpy()) / g[["measured_us"]].to_numpy()
            out.append({"dtype": dtype, "band": band, "rows": len(g),
                        "sim": 100 * np.abs(rel[:, 0]).mean(), "bias": 100 * rel[:, 0].mean(),
                        "roofline": 100 * np.abs(rel[:, 1]).mean(),
                        "eff_roofline": 100 * np.abs(rel[:, 2]).mean()})
    return pd.DataFrame(out).round(1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", default="../shared/groundtruth")
    p.add_argument("--per-band", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--half", choices=("test", "fit", "all"), default="test")
    p.add_argument("--file", default=WO_PATH, help="under --groundtruth (default the H200 file)")
    p.add_argument("--hw", default="h200-sxm", help="the GPU the file was measured on")
    args = p.parse_args(argv)
    m = sample_wo(read_measurements(Path(args.groundtruth) / args.file), args.per_band, args.seed,
                  args.half)
    result = validate_against(m, load_hardware(args.hw), cache_dir=None)
    print(band_table(result.frame, m.input["gemm_dtype"]).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
