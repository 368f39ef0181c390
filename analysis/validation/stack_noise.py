"""How far two published tables of one GPU disagree on the same bf16 GEMM shapes, per M band: the
floor under a GEMM MAPE bar that no single model of those rows can beat.

    python -m mpsim.analysis.validation.stack_noise [--groundtruth ../shared/groundtruth] [--doc DOC]

Every pair of aiconfigurator GEMM files of one GPU (`<gpu>/gemm/<framework>/<version>/gemm_perf.parquet`)
is joined on (m, n, k) over their bf16 rows (each collector times cuBLAS through torch's F.linear), and
the disagreement of the second file against the first, |b - a| / a, is summarized per M band: its mean
(the MAPE a model equal to file a would score on file b), median and p90. A model that sits between
two files scores about half their MAPE on each at best. The doc block sits between the
`<!-- validation:stack-noise -->` markers (replaced in place; added at the end the first time).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.doc_block import publish, run, write_block
from mpsim.errors import MpsimInputError

BANDS = ((1, 16, "1-16"), (17, 256, "17-256"), (257, 8192, "257-8192"), (8193, 1 << 62, ">8192"))
HEADING = "### Disagreement between stacks, every GPU"
BEGIN, END = "<!-- validation:stack-noise -->", "<!-- /validation:stack-noise -->"
KEY = ["m", "n", "k"]


def gemm_files(gt: Path) -> dict[str, dict[str, Path]]:
    """{gpu folder: {"framework version": file}} of the aiconfigurator GEMM tables under `gt`."""
    root = gt / "aiconfigurator"
    out: dict[str, dict[str, Path]] = {}
    for f in sorted(root.glob("*/gemm/*/*/gemm_perf.parquet")):
        gpu, _, fw, ver = f.relative_to(root).parts[:4]
        out.setdefault(gpu, {})[f"{fw} {ver}"] = f
    if not out:
        raise MpsimInputError(f"{root}: no <gpu>/gemm/<framework>/<version>/gemm_perf.parquet tables")
    return out


def bf16_latency(path: Path) -> pd.Series:
    """Latency (us) of the file's bf16 rows by (m, n, k); the mean where a shape repeats."""
    cols = ["gemm_dtype", *KEY, "latency"]
    d = pd.read_parquet(path)
    missing = [c for c in cols if c not in d.columns]
    if missing:
        raise MpsimInputError(f"{path}: no column(s) {missing} (expected {cols})")
    d = d[d["gemm_dtype"] == "bfloat16"]
    if d.empty:
        raise MpsimInputError(f"{path}: no bfloat16 rows (gemm_dtype)")
    return d.groupby(KEY)["latency"].mean() * 1e3


def pair_rows(gpu: str, name_a: str, a: pd.Series, name_b: str, b: pd.Series) -> list[dict[str, object]]:
    """One row per M band and one for all: shapes both files time, MAPE / median / p90 (%)."""
    idx = a.index.intersection(b.index)
    if len(idx) == 0:
        return []
    rel = ((b.loc[idx] - a.loc[idx]).abs() / a.loc[idx]).to_numpy()
    m = idx.get_level_values("m").to_numpy()
    out = []
    for lo, hi, band in (*BANDS, (1, 1 << 62, "all")):
        e = rel[(m >= lo) & (m <= hi)]
        if len(e):
            out.append({"GPU": gpu, "a": name_a, "b": name_b, "M band": band, "shapes": len(e),
                        "MAPE %": 100 * float(e.mean()), "median %": 100 * float(np.median(e)),
                        "p90 %": 100 * float(np.quantile(e, 0.9))})
    return out


def noise_table(gt: Path) -> pd.DataFrame:
    rows: list[dict[str, object]] = []
    for gpu, files in gemm_files(gt).items():
        lat = {name: bf16_latency(f) for name, f in files.items()}
        for (na, a), (nb, b) in itertools.combinations(sorted(lat.items()), 2):
            rows += pair_rows(gpu, na, a, nb, b)
    return pd.DataFrame(rows)


def markdown(t: pd.DataFrame) -> str:
    lines = ["bf16 GEMM shapes timed by two files of one GPU, |b - a| / a in % per M band "
             "(`python -m mpsim.analysis.validation.stack_noise`):", "",
             "| GPU | a | b | M band | shapes | MAPE % | median % | p90 % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in t.to_dict("records"):
        lines.append(f"| {r['GPU']} | {r['a']} | {r['b']} | {r['M band']} | {r['shapes']} | "
                     f"{r['MAPE %']:.1f} | {r['median %']:.1f} | {r['p90 %']:.1f} |")
    return "\n".join(lines)


def write_doc(doc: Path, t: pd.DataFrame) -> Path:
    return write_block(doc, BEGIN, END, HEADING, markdown(t))


def main(argv: Sequence[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groundtruth", type=Path, default=root.parent / "shared" / "groundtruth")
    p.add_argument("--doc", type=Path, default=None, help="write the table into this doc")
    a = p.parse_args(argv)
    t = noise_table(a.groundtruth)
    return publish(markdown(t), a.doc, lambda doc: write_doc(doc, t))


if __name__ == "__main__":
    sys.exit(run(main))
