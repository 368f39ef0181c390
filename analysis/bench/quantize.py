"""Quantizing a real checkpoint on this machine: one decoder layer at a 7B model's shapes, extrapolated.

Random fp16 weights (std 0.02) at Vicuna-7B's fused shapes (qkv 12288x4096, o 4096x4096, gate_up
22016x4096, down 4096x11008) go through what `mpsim quantize` runs (mpsim.engine.parallel_quant):
group quantization (w4, G = 128) and any-precision clustering (4-bit parent, 2-bit seed), on every
core. One warm-up on a small matrix first (numba compile and cache load excluded). The whole model
is the layer time x 32 layers (embeddings and lm_head stay fp16: no quantization work); reading the
safetensors (page cache or disk) and writing the output are not included. Writes
analysis/results/bench_quantize.csv and prints the table docs/real-models.md quotes.

    python -m mpsim.analysis.bench.quantize [--model vicuna-7b] [--formats group,anyprec]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.engine.parallel_quant import quantize_anyprec_parallel, quantize_group_parallel
from mpsim.models import get_model
from mpsim.traces.atomic import write_csv_atomic

RESULTS = Path(__file__).resolve().parents[1] / "results"
GOALS_S = {"group": 120.0, "anyprec": 1800.0}  # the goals for a 7B on the 2-core machine


def _time(fmt: str, w: np.ndarray) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: every thread's work, whatever else runs)."""
    start, cpu = time.perf_counter(), time.process_time()
    if fmt == "group":
        quantize_group_parallel(w, 4, 128)
    else:
        quantize_anyprec_parallel(w, 4, 2)
    return time.perf_counter() - start, time.process_time() - cpu


def bench(model: str, formats: list[str]) -> pd.DataFrame:
    spec = get_model(model)
    rng = np.random.default_rng(0)
    for fmt in formats:  # warm-up: numba compile / cache load, thread pools
        _time(fmt, (rng.standard_normal((64, 256)) * 0.02).astype(np.float16))
    rows = []
    for module, (n, k, _) in spec.linear_shapes().items():
        w = (rng.standard_normal((n, k), dtype=np.float32) * 0.02).astype(np.float16)
        for fmt in formats:
            s, cpu = _time(fmt, w)
            rows.append({"model": model, "module": module, "n": n, "k": k, "format": fmt, "seconds": s,
                         "cpu_seconds": cpu, "us_per_row": s / n * 1e6})
            print(f"{module:<8} {n:>6} x {k:<6} {fmt:<8} {s:8.2f} s wall {cpu:8.2f} s CPU", flush=True)
    t = pd.DataFrame(rows)
    t["cores"] = os.cpu_count()
    t["load_avg_1min"] = os.getloadavg()[0]  # the machine is shared: other jobs slow every figure
    t["host"] = platform.node()
    return t


def summary(t: pd.DataFrame, layers: int) -> str:
    """Per format: one layer's wall and CPU time, the model extrapolated from the wall time as measured
    and from the CPU time spread over the cores (what the machine would take with nothing else on it)."""
    cores = int(t["cores"].iloc[0])
    lines = [f"| format | one layer wall (s) | one layer CPU (s) | x{layers} layers, measured wall (min) | "
             f"x{layers} layers, CPU / {cores} cores (min) | goal (min) | meets (idle machine) |",
             "|---|---|---|---|---|---|---|"]
    for fmt, sel in t.groupby("format", sort=False):
        wall, cpu = float(sel["seconds"].sum()), float(sel["cpu_seconds"].sum())
        idle = cpu * layers / cores
        goal = GOALS_S[str(fmt)]
        lines.append(f"| {fmt} | {wall:.1f} | {cpu:.1f} | {wall * layers / 60:.1f} | {idle / 60:.1f} | "
                     f"{goal / 60:.0f} | {'yes' if idle <= goal else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="vicuna-7b")
    p.add_argument("--formats", default="group,anyprec")
    args = p.parse_args(argv)
    t = bench(args.model, args.formats.split(","))
    RESULTS.mkdir(exist_ok=True)
    write_csv_atomic(t, RESULTS / "bench_quantize.csv", index=False, float_format="%.4g")
    print(summary(t, get_model(args.model).num_layers))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
