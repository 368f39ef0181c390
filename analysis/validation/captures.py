"""mpsim's own kernels on a real GPU: every capture committed under traces/data/<device>/ (`mpsim
capture` with the profiler's kernel times) priced by the simulator and the roofline on its device's
hardware file, as `mpsim validate` prices it; two tables between the `<!-- validation:captures -->`
and `<!-- validation:capture-steps -->` markers of docs/validation.md.

    python -m mpsim.analysis.validation.captures [--data traces/data] [--doc docs/validation.md]
        [--print]

Per capture and launch class of the decode steps and of the prefill GEMMs (the rest of prefill: one
line over its other classes): the
launches, the measured median, the simulator's MAPE and bias and the roofline's MAPE. Per capture:
one decode step's kernel time (the median over steps of the sum of its launches), measured and
predicted. Nothing is fitted here (SimParams.load_latency_ns names the capture rows it came from).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.metrics import error_stats
from mpsim.analysis.validation.report_md import emit
from mpsim.analysis.validation.trace_form import validate_trace
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.traces.io import read_trace

ROOT = Path(__file__).resolve().parents[2]
# A captured trace's device name (its `device` column, torch's name) -> its hardware file.
DEVICE_HW = {"H200": "h200-sxm", "H100": "h100-sxm", "A100": "a100-sxm-80gb", "L40S": "l40s",
             "4090": "rtx-4090"}


def hw_for_device(device: str) -> str | None:
    """The hardware file of a GPU named as torch names it ("NVIDIA H200"), None for an unknown one."""
    return next((hw for key, hw in DEVICE_HW.items() if key in device), None)


def captures(data: Path) -> list[Path]:
    """Parquet captures under `data`/<device>/, in name order."""
    found = sorted(data.glob("*/*.parquet"))
    if not found:
        raise MpsimInputError(f"{data}: no captures (<device>/<name>.parquet)")
    return found


def hw_of(path: Path, rows: pd.DataFrame) -> str:
    """The hardware file of the GPU that measured the trace (its `device` column)."""
    devices = rows["device"].dropna().astype(str).unique()
    for name in devices:
        hw = hw_for_device(name)
        if hw is not None:
            return hw
    raise MpsimInputError(f"{path}: device {list(devices)} has no hardware file "
                          f"(known: {', '.join(DEVICE_HW)})")


def validate(path: Path) -> tuple[str, pd.DataFrame]:
    """(hardware file name, the scored rows: measured, predicted and roofline times, class)."""
    trace = read_trace(str(path))
    hw = hw_of(path, trace.rows)
    v = validate_trace(trace, load_hardware(hw), cache_dir=None)
    scored = v.frame[v.frame["status"] == "ok"].copy()
    scored["measured_us"] = scored["measured_us"].astype(float)
    return hw, scored


def class_lines(name: str, hw: str, f: pd.DataFrame) -> list[dict[str, object]]:
    out = []
    groups = [(f"decode {c}", g) for c, g in f[f["phase"] == "decode"].groupby("cls", sort=True)]
    prefill = f[f["phase"] == "prefill"]
    gemm = (prefill["op"] == "gemm") & (prefill["m"].astype(float) > 1)  # lm_head runs one row
    groups += [(f"prefill {c}", g) for c, g in prefill[gemm].groupby("cls", sort=True)]
    groups.append(("prefill (every other class)", prefill[~gemm]))
    for cls, g in groups:
        if g.empty:
            continue
        sim = error_stats(g["predicted_us"].to_numpy(), g["measured_us"].to_numpy())
        roof = error_stats(g["roofline_us"].to_numpy(), g["measured_us"].to_numpy())
        out.append({"capture": name, "hw": hw, "class": cls, "launches": len(g),
                    "measured_us": float(g["measured_us"].median()), "sim_mape": sim["mape_pct"],
                    "sim_bias": sim["bias_pct"], "roofline_mape": roof["mape_pct"]})
    return out


def step_line(name: str, hw: str, f: pd.DataFrame) -> dict[str, object]:
    d = f[f["phase"] == "decode"].groupby("step")[["measured_us", "predicted_us", "roofline_us"]].sum()
    med = d.median()
    return {"capture": name, "hw": hw, "steps": len(d), "measured_us": float(med["measured_us"]),
            "sim_us": float(med["predicted_us"]), "roofline_us": float(med["roofline_us"]),
            "sim_error": 100 * float(np.median(d["predicted_us"] / d["measured_us"] - 1))}


def class_block(lines: pd.DataFrame) -> str:
    head = ["| capture (device file) | class | launches | measured median (us) | simulator MAPE | "
            "bias | roofline MAPE |", "|---|---|---|---|---|---|---|"]
    body = [f"| {r.capture} ({r.hw}) | {r['class']} | {r.launches} | {r.measured_us:.1f} | "
            f"{r.sim_mape:.1f}% | {r.sim_bias:+.1f}% | {r.roofline_mape:.1f}% |"
            for _, r in lines.iterrows()]
    return "\n".join(head + body) + "\n"


def step_block(steps: pd.DataFrame) -> str:
    head = ["| capture (device file) | decode steps | measured (us) | simulator (us) | error | "
            "roofline (us) |", "|---|---|---|---|---|---|"]
    body = [f"| {r.capture} ({r.hw}) | {r.steps} | {r.measured_us:.1f} | {r.sim_us:.1f} | "
            f"{r.sim_error:+.1f}% | {r.roofline_us:.1f} |" for _, r in steps.iterrows()]
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "traces" / "data")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "validation.md")
    p.add_argument("--print", action="store_true", help="print the tables; leave the doc alone")
    args = p.parse_args(argv)
    lines, steps = [], []
    for path in captures(args.data):
        hw, f = validate(path)
        lines += class_lines(path.stem, hw, f)
        steps.append(step_line(path.stem, hw, f))
    blocks = {"capture-steps": step_block(pd.DataFrame(steps)),
              "captures": class_block(pd.DataFrame(lines))}
    emit(args.doc, blocks, args.print, f"the captures' tables ({len(steps)} captures)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
