"""How the fp8 GEMM rows move with the energy of an fp8 tensor cycle (SimParams.fp8_tensor_energy).

The power model prices a tensor-pipe cycle running fp8 MMAs at `fp8_tensor_energy` times a 16-bit
cycle's energy (mpsim/sim/gpu/power.py `tensor_energy_share`); a power-limited fp8 GEMM's clock, so
its time, follows. This bench prices a stratified sample of the published fp8 GEMM rows (`--select
fp8`, aiconfigurator's vLLM 0.24.0 and TRT-LLM 1.3.0rc20 tables of H200, H100 and B200) at each
factor, everything else shipped, and writes MAPE and bias per GPU, stack, class and M band to
analysis/results/fp8_power.csv (a markdown table on stdout). Tables absent: skipped with a reason.

    python -m mpsim.analysis.bench.fp8_power [--factors 1.0,1.15,1.3] [--sample 150]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.against import validate_against
from mpsim.analysis.validation.sources import read_measurements
from mpsim.hw_models.loader import load_hardware
from mpsim.sim.params import DEFAULT_PARAMS, with_params
from mpsim.traces.atomic import write_csv_atomic

ROOT = Path(__file__).resolve().parents[2]
GROUNDTRUTH = ROOT.parent / "shared" / "groundtruth" / "aiconfigurator"
RESULTS = ROOT / "analysis" / "results" / "fp8_power.csv"
TABLES = (("h200_sxm", "h200-sxm", "vllm/0.24.0"), ("h100_sxm", "h100-sxm", "vllm/0.24.0"),
          ("b200_sxm", "b200-sxm", "vllm/0.24.0"), ("h200_sxm", "h200-sxm", "trtllm/1.3.0rc20"),
          ("h100_sxm", "h100-sxm", "trtllm/1.3.0rc20"))
BANDS = ((1, 16, "1-16"), (17, 256, "17-256"), (257, 1 << 30, ">256"))
CLASSES = ("gemm fp8", "gemm fp8_block")


def errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Per priced fp8 / fp8_block row: class, M band and relative error."""
    ok = frame[(frame["status"] == "ok") & frame["cls"].astype(str).isin(CLASSES)]
    m = ok["m"].to_numpy(dtype=np.int64)
    band = np.select([(m >= lo) & (m <= hi) for lo, hi, _ in BANDS], [b for _, _, b in BANDS], "")
    err = (ok["predicted_us"].to_numpy(dtype=float) - ok["measured_us"].to_numpy(dtype=float)) \
        / ok["measured_us"].to_numpy(dtype=float)
    return pd.DataFrame({"cls": ok["cls"].astype(str).to_numpy(), "band": band, "err": err})


def table(factors: Sequence[float], sample: int, root: Path) -> pd.DataFrame:
    out = []
    for folder, hw_name, stack in TABLES:
        path = root / folder / "gemm" / stack / "gemm_perf.parquet"
        if not path.is_file():
            print(f"skipped: {path} is absent (../shared/groundtruth, docs/validation.md)", file=sys.stderr)
            continue
        m, hw = read_measurements(path), load_hardware(hw_name)
        for factor in factors:
            p = with_params(DEFAULT_PARAMS, {"fp8_tensor_energy": factor})
            e = errors(validate_against(m, hw, selection="fp8", sample=sample, cache_dir=None,
                                        params=p, progress=False).frame)
            for (cls, band), g in e.groupby(["cls", "band"]):
                out.append({"gpu": hw_name, "stack": stack, "cls": cls, "band": band,
                            "fp8_tensor_energy": factor, "rows": len(g),
                            "mape": round(100 * float(np.abs(g["err"]).mean()), 1),
                            "bias": round(100 * float(g["err"].mean()), 1)})
            print(f"{hw_name} {stack} x{factor}: {len(e)} rows", file=sys.stderr)
    return pd.DataFrame(out)


def markdown(df: pd.DataFrame) -> str:
    factors = sorted(df["fp8_tensor_energy"].unique())
    head = ("| GPU | stack | class | M band | rows | " + " | ".join(f"x{f:g} MAPE / bias" for f in factors)
            + " |\n|---|---|---|---|---|" + "---|" * len(factors) + "\n")
    lines = []
    for (gpu, stack, cls, band), g in df.groupby(["gpu", "stack", "cls", "band"], sort=False):
        by = g.set_index("fp8_tensor_energy")
        cells = [f"{by.loc[f, 'mape']} / {by.loc[f, 'bias']:+}" for f in factors]
        rows = int(g["rows"].iloc[0])
        lines.append(f"| {gpu} | {stack} | {cls} | {band} | {rows} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--factors", default="1.0,1.15,1.3", help="fp8_tensor_energy values, comma-separated")
    p.add_argument("--sample", type=int, default=150, help="stratified rows per table (at most)")
    p.add_argument("--groundtruth", type=Path, default=GROUNDTRUTH, help="the aiconfigurator folder")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    try:
        factors = [float(x) for x in args.factors.split(",")]
    except ValueError:
        p.error(f"--factors {args.factors!r}: expected numbers separated by commas, e.g. 1.0,1.15,1.3")
    if any(f <= 0 for f in factors):
        p.error(f"--factors {args.factors!r}: every factor must be > 0")
    df = table(factors, args.sample, args.groundtruth)
    if df.empty:
        print("skipped: no fp8 GEMM table found under " + str(args.groundtruth))
        return 0
    write_csv_atomic(df, args.out)
    print(markdown(df))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
