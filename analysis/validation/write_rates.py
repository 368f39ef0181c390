"""GEMM outputs: the rate at which a published bf16 GEMM stores its output, by output size, and the
simulator's rate for the same rows (docs/validation.md#gemm-outputs-stop-47).

    python -m mpsim.analysis.validation.write_rates [--groundtruth ../shared/groundtruth]
        [--rows 8] [--workers 2] [--doc docs/validation.md]

Rows whose time is their output: bf16 GEMMs with k <= 64 and m, n >= 256, so the operands read are
at most a few percent of the bytes stored. Their rate is (output + operand bytes) / time, also as a
share of the hardware file's datasheet DRAM peak: where it stays flat from a few MB to gigabytes,
the output streams to DRAM (a partitioned L2, H100/H200/B200), and where it runs above the peak and
then falls, the output stays in L2 while it fits (Ada: SimParams.replay_out_from / replay_out_to).
For each file of fp8_table.FILES (its bf16 rows) and output bin, the measured median rate (p10-p90)
over every such row, and the simulated median over `--rows` of them (a fixed-seed choice) priced
with the shipped defaults. The table is printed, or written between `<!-- validation:write-rates
-->` markers. Absent files are skipped with a reason.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.fp8_table import over_files
from mpsim.analysis.validation.report_md import emit, write_doc

BINS_MIB = (8, 32, 64, 96, 256, 1024, float("inf"))
SEED = 47
MARKER = "write-rates"
HEADER = ("| GPU | stack | output (MiB) | rows | measured TB/s | share of peak | p10-p90 | "
          "simulated TB/s | share of peak | priced |\n|---|---|---|---|---|---|---|---|---|---|")


def output_rows(rows: pd.DataFrame) -> pd.Series:
    """The bf16 GEMM rows whose time is their output (k <= 64, m and n >= 256, status ok)."""
    return ((rows["cls"].astype(str) == "gemm bf16") & (rows["status"] == "ok") & (rows["k"] <= 64)
            & (rows["m"] >= 256) & (rows["n"] >= 256))


def moved_bytes(rows: pd.DataFrame) -> pd.Series:
    m, n, k = (rows[c].astype(float) for c in ("m", "n", "k"))
    return 2.0 * (m * n + (m + n) * k)


def size_bin(rows: pd.DataFrame) -> pd.Series:
    mib = 2.0 * rows["m"].astype(float) * rows["n"].astype(float) / 2**20
    labels = [f"{lo:g}-{hi:g}" if np.isfinite(hi) else f">{lo:g}"
              for lo, hi in itertools.pairwise(BINS_MIB)]
    return pd.cut(mib, list(BINS_MIB), labels=labels)


def chosen(rows: pd.DataFrame, per_bin: int) -> pd.Series:
    """A mask of at most `per_bin` output rows per size bin (fixed seed)."""
    rng = np.random.default_rng(SEED)
    keep = pd.Series(False, index=rows.index)
    ok = rows[output_rows(rows)]
    for _, g in ok.groupby(size_bin(ok), observed=True):
        pick = rng.choice(len(g), size=min(per_bin, len(g)), replace=False)
        keep.loc[g.index[np.sort(pick)]] = True
    return keep


def _one(job: tuple[tuple[str, str, str, str, str], Path, int]) -> list[str]:
    from mpsim.analysis.validation.against import validate_against
    from mpsim.analysis.validation.measured import Measurements
    from mpsim.analysis.validation.sources import read_measurements
    from mpsim.hw_models.loader import load_hardware

    (gpu, _, hw_name, fw, version), path, per_bin = job
    hw = load_hardware(hw_name)
    peak = hw.dram_bandwidth_Bps() / 1e12
    m = read_measurements(path)
    rows = m.rows.copy()
    keep = chosen(rows, per_bin)
    rows.loc[~keep, "status"] = "skipped: not an output-bound row chosen"
    frame = validate_against(Measurements(m.source, m.input, rows, m.notes), hw, progress=False).frame
    priced = frame[frame["status"] == "ok"]
    sim = (moved_bytes(priced) / priced["predicted_us"] / 1e6).groupby(size_bin(priced), observed=True)
    meas_rows = m.rows[output_rows(m.rows)]
    rate = moved_bytes(meas_rows) / meas_rows["measured_us"].astype(float) / 1e6
    out = []
    for label, r in rate.groupby(size_bin(meas_rows), observed=True):
        lo, hi = np.percentile(r.to_numpy(dtype=float), [10, 90])
        s = sim.get_group(label) if label in sim.groups else pd.Series(dtype=float)
        sim_cells = (f"{s.median():.2f} | {s.median() / peak:.2f}" if len(s) else "– | –")
        out.append(f"| {gpu} | {fw} {version} | {label} | {len(r)} | {r.median():.2f} | "
                   f"{r.median() / peak:.2f} | {lo:.2f}-{hi:.2f} | {sim_cells} | {len(s)} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=Path("../shared/groundtruth"))
    p.add_argument("--rows", type=int, default=8, help="rows priced per file and output bin (at most)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--doc", type=Path, help="write between the doc's <!-- validation:write-rates --> markers")
    args = p.parse_args(argv)
    if args.rows < 1:
        p.error(f"--rows {args.rows}: expected a positive number of rows")
    if args.doc is not None:
        write_doc(args.doc, {MARKER: ""}, dry=True)  # a missing marker fails before any work
    lines = over_files(args.groundtruth, _one, args.rows, args.workers)
    if not lines:
        print(f"skipped: no bf16 GEMM table under {args.groundtruth} (docs/validation.md)", file=sys.stderr)
        return 0
    text = HEADER + "\n" + "\n".join(lines)
    if args.doc is None:
        print(text)
    else:
        emit(args.doc, {MARKER: text}, False, "the GEMM output-rate table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
