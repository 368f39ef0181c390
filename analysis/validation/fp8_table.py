"""The FP8 and FP4 GEMM table of docs/validation.md (issue 26): every published fp8 / fp8_block /
nvfp4 table priced with the shipped defaults, per GPU, stack, class and M band.

    python -m mpsim.analysis.validation.fp8_table [--groundtruth ../shared/groundtruth]
        [--sample 2000] [--workers 2] [--doc docs/validation.md]

Each file is `mpsim validate --against FILE --hw H --select fp8 --sample N` (a stratified sample,
fixed seed), run in `--workers` processes; the table is printed, or written between the
`<!-- validation:fp8 -->` markers of `--doc`. Columns: rows, the simulator's MAPE, its p90 absolute
error and bias, the plain roofline's MAPE, and whether the cell meets issue 26's 10% bar (B200's fp8
and fp8_block classes are outside it; L40S's cells are issue 24's GEMM bar, the same 10%; "ties the
roofline" marks a host-bound cell). Absent files are skipped with a reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.analysis.validation.report_md import emit, write_doc

FILES = (("H200", "h200_sxm", "h200-sxm", "vllm", "0.24.0"),
         ("H200", "h200_sxm", "h200-sxm", "sglang", "0.5.14"),
         ("H200", "h200_sxm", "h200-sxm", "trtllm", "1.3.0rc20"),
         ("H100", "h100_sxm", "h100-sxm", "vllm", "0.24.0"),
         ("H100", "h100_sxm", "h100-sxm", "trtllm", "1.3.0rc20"),
         ("B200", "b200_sxm", "b200-sxm", "vllm", "0.24.0"),
         ("B200", "b200_sxm", "b200-sxm", "trtllm", "1.3.0rc20"),
         ("L40S", "l40s", "l40s", "vllm", "0.24.0"),
         ("L40S", "l40s", "l40s", "trtllm", "1.3.0rc20"),
         ("L40S", "l40s", "l40s", "trtllm", "1.0.0"))
BANDS = ((1, 16, "1-16"), (17, 256, "17-256"), (257, 8192, "257-8192"))
CLASSES = ("gemm fp8", "gemm fp8_block", "gemm nvfp4")
BAR = 10.0
HEADER = ("| GPU | stack | class | M band | rows | sim MAPE | p90 | bias | roofline MAPE | <= 10% |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
MARKER = "fp8"


def lines(gpu: str, stack: str, frame: pd.DataFrame) -> list[str]:
    """The table's rows of one file's priced frame (validate_against's rows)."""
    ok = frame[frame["status"] == "ok"]
    out = []
    for cls in CLASSES:
        g = ok[ok["cls"].astype(str) == cls]
        if g.empty:
            continue
        outside = gpu == "B200" and cls != "gemm nvfp4"
        label = cls + (" (outside the bar)" if outside else "")
        parts = [(b, g[(g["m"] >= lo) & (g["m"] <= hi)]) for lo, hi, b in BANDS] + [("all", g)]
        for band, s in parts:
            if s.empty:
                continue
            measured = s["measured_us"].to_numpy(dtype=float)
            e = (s["predicted_us"].to_numpy(dtype=float) - measured) / measured
            roof = 100 * float(np.mean(np.abs(s["roofline_us"].to_numpy(dtype=float) - measured) / measured))
            mape = 100 * float(np.mean(np.abs(e)))
            if outside:
                verdict = "–"
            elif round(mape, 1) <= BAR:
                verdict = "yes, ties the roofline (host-bound)" if abs(mape - roof) < 0.5 else "yes"
            else:
                verdict = "**no**"
            out.append(f"| {gpu} | {stack} | {label} | {band} | {len(s)} | {mape:.1f} | "
                       f"{100 * float(np.percentile(np.abs(e), 90)):.1f} | {100 * float(np.mean(e)):+.1f} | "
                       f"{roof:.1f} | {verdict} |")
    return out


def _one(job: tuple[tuple[str, str, str, str, str], Path, int]) -> list[str]:
    from mpsim.analysis.validation.against import validate_against
    from mpsim.analysis.validation.sources import read_measurements
    from mpsim.hw_models.loader import load_hardware

    (gpu, _, hw, fw, version), path, sample = job
    frame = validate_against(read_measurements(path), load_hardware(hw), selection="fp8", sample=sample,
                             progress=False).frame
    return lines(gpu, f"{fw} {version}", frame)


def over_files(groundtruth: Path, one: Callable[[Any], list[str]], arg: int, workers: int) -> list[str]:
    """`one((spec, path, arg))`'s table lines for every FILES table present, in `workers` processes;
    an absent file is skipped with a reason (the tile-step command shares this)."""
    jobs = []
    for spec in FILES:
        path = groundtruth / "aiconfigurator" / spec[1] / "gemm" / spec[3] / spec[4] / "gemm_perf.parquet"
        if path.is_file():
            jobs.append((spec, path, arg))
        else:
            print(f"skipped: {path} is absent", file=sys.stderr)
    if not jobs:
        return []
    with ProcessPoolExecutor(max(1, workers)) as pool:
        return [line for part in pool.map(one, jobs) for line in part]


def finish(lines: list[str], header: str, doc: Path | None, marker: str, what: str,
           groundtruth: Path) -> int:
    """A FILES table command's ending: print the table, or write it between the doc's markers."""
    if not lines:
        print(f"skipped: no fp8 GEMM table under {groundtruth} (docs/validation.md)")
        return 0
    text = header + "\n" + "\n".join(lines)
    if doc is None:
        print(text)
    else:
        emit(doc, {marker: text}, False, what)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=Path("../shared/groundtruth"))
    p.add_argument("--sample", type=int, default=2000, help="stratified rows per file (at most)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--doc", type=Path, help="write between the doc's <!-- validation:fp8 --> markers")
    args = p.parse_args(argv)
    if args.sample < 1:
        p.error(f"--sample {args.sample}: expected a positive number of rows")
    if args.doc is not None:
        write_doc(args.doc, {MARKER: ""}, dry=True)  # a missing marker fails before any work
    lines = over_files(args.groundtruth, _one, args.sample, args.workers)
    return finish(lines, HEADER, args.doc, MARKER, "the fp8 table", args.groundtruth)


if __name__ == "__main__":
    raise SystemExit(main())
