"""Power-limited clock and power per GPU file: the clock model and the energy model side by side.

For every shipped GPU hardware file: a saturating bf16 GEMM (m = n = k = 8192, by whichever of
cuBLAS's and mpsim's Triton GEMM keeps the tensor pipes busiest) and a memory-bound GEMV (m = 1,
n = k = 8192), each simulated by the GPU model at its power-limited clock (mpsim/sim/gpu/power.py);
prints a markdown table (clock under the GEMM, GEMM power, GEMV power, TDP) and writes
analysis/results/power_clock.csv.

    python -m mpsim.analysis.bench.power [--hw h200-sxm l40s]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.launch_plan import gemm_row
from mpsim.library import cublas
from mpsim.sim import simulate
from mpsim.sim.memo import LaunchMemo
from mpsim.traces.atomic import write_csv_atomic
from mpsim.traces.trace import rows_to_frame

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "analysis" / "results" / "power_clock.csv"
SIZE = 8192


def gemm_power(hw: GpuSpec, m: int, memo: LaunchMemo) -> tuple[float, float, str]:
    """Average power (W), clock (Hz) and kernel of an m x 8192 x 8192 fp16/bf16 GEMM, by the kernel
    (cuBLAS or mpsim's Triton GEMM) whose tensor pipes are busiest."""
    best = (-1.0, 0.0, 0.0, "")
    for kernel in (cublas.CUBLAS_GEMM, None):
        row = gemm_row(m, SIZE, SIZE, kernel=kernel)
        res = simulate(rows_to_frame([row]), hw, "sim", memo=memo)
        la = res.launches
        busy = float(la["util_tensor"].iloc[0])
        if busy > best[0]:
            best = (busy, res.summary.energy_j / res.summary.total_s,
                    float(la["cycles"].iloc[0] / la["kernel_s"].iloc[0]), str(row["kernel"]))
    return best[1], best[2], best[3]


def gpu_names() -> list[str]:
    return [n for n in list_hardware() if isinstance(load_hardware(n), GpuSpec)]


def table(names: Sequence[str]) -> pd.DataFrame:
    memo = LaunchMemo(None)
    out = []
    for name in names:
        hw = load_hardware(name)
        if not isinstance(hw, GpuSpec) or hw.energy is None:
            raise SystemExit(f"{name}: not a GPU hardware file with an energy block")
        gemm_w, gemm_hz, kernel = gemm_power(hw, SIZE, memo)
        gemv_w, gemv_hz, _ = gemm_power(hw, 1, memo)
        out.append({"gpu": name, "tdp_W": hw.energy.tdp_W, "base_MHz": hw.compute.base_clock_MHz,
                    "boost_MHz": hw.compute.boost_clock_MHz, "gemm_clock_MHz": round(gemm_hz / 1e6),
                    "gemm_W": round(gemm_w, 1), "gemm_over_tdp": round(gemm_w / hw.energy.tdp_W, 3),
                    "gemm_kernel": kernel, "gemv_clock_MHz": round(gemv_hz / 1e6),
                    "gemv_W": round(gemv_w, 1)})
    return pd.DataFrame(out)


def markdown(df: pd.DataFrame) -> str:
    head = ("| GPU | TDP W | base / boost MHz | GEMM clock MHz | GEMM W | GEMM / TDP | GEMM kernel "
            "| GEMV clock MHz | GEMV W |\n|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r.gpu} | {r.tdp_W:g} | {r.base_MHz:g} / {r.boost_MHz:g} | {r.gemm_clock_MHz} | {r.gemm_W} "
        f"| {r.gemm_over_tdp} | {r.gemm_kernel} | {r.gemv_clock_MHz} | {r.gemv_W} |\n"
        for r in df.itertuples())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hw", nargs="*", default=None, help="GPU hardware files (default: every one)")
    a = p.parse_args(argv)
    df = table(a.hw or gpu_names())
    write_csv_atomic(df, RESULTS)
    sys.stdout.write(markdown(df))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
