"""Every stack in the ground truth, per class: simulator vs roofline vs the efficiency roofline.

    python -m mpsim.analysis.validation.stacks [--groundtruth ../shared/groundtruth]
        [--doc docs/validation.md] [--sample 2000] [--work DIR] [--cache-dir DIR] [--only TEXT]

Walks `aiconfigurator/{gpu}/{gemm,attention}/{framework}/{version}/*_perf.parquet` for every GPU
folder with a hardware file of the same name (`h200_sxm` -> `h200-sxm`; a folder without one is
listed as skipped), reads each table with the `stacks` selection (selections.py), prices a
stratified sample of at most `--sample` rows per table (sampling.py) through the same code as
`mpsim validate --against` with the shipped defaults, and writes two tables between the
`<!-- validation:stacks -->` and `<!-- validation:stacks-kernels -->` markers of the doc
(stacks_md.py). Each table's priced rows are kept in `--work` (one Parquet per table, written
atomically, named by a hash of the table's bytes, the sample, the hardware file, the simulator's
and the validation code's sources), so an interrupted run continues where it stopped and a rerun
with nothing changed only re-renders; the launch memo (`--cache-dir`) makes a changed table cheap.
`--only TEXT` keeps the tables whose path contains TEXT (the doc then shows only those: a check of
one table, not the report).

The efficiency roofline max(t_math/e_c, t_mem/e_m) + c of a (GPU, stack, class) has its three
constants fitted on ANOTHER stack of the same GPU and class (another framework first, then another
version of the same framework; among those, the one with the most priced rows, then by name); a
class only one stack measured is fitted on its own rows (in sample), and the table says so.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from mpsim.analysis.validation.against import validate_against
from mpsim.analysis.validation.metrics import eff_roofline, fit_eff_roofline
from mpsim.analysis.validation.sampling import SEED, stratified_sample
from mpsim.analysis.validation.selections import apply_selection, selected
from mpsim.analysis.validation.sources import read_measurements
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.progress import progress_bar
from mpsim.sim import DEFAULT_CACHE
from mpsim.sim.memo import default_cache_dir, fingerprint_files, namespace
from mpsim.sim.params import DEFAULT_PARAMS
from mpsim.traces.atomic import write_parquet_atomic

FAMILIES = ("gemm", "attention")
SELECTION = "stacks"
DEFAULT_SAMPLE = 2000
DTYPES = ("gemm_dtype", "attn_dtype", "kv_cache_dtype", "kernel_source")
KEEP = ("cls", "band", "status", "measured_us", "predicted_us", "roofline_us", "t_math_us",
        "t_mem_us", *DTYPES)


@dataclass(frozen=True)
class Table:
    gpu: str        # the ground truth's folder, e.g. h200_sxm
    family: str     # gemm | attention
    framework: str
    version: str
    path: Path

    @property
    def stack(self) -> str:
        return f"{self.framework} {self.version}"

    @property
    def label(self) -> str:
        return f"{self.gpu}/{self.family}/{self.framework}/{self.version}/{self.path.name}"


def hardware_of(gpu_folder: str) -> str | None:
    """The shipped hardware file of a ground-truth GPU folder (`_` -> `-`), None when there is none."""
    name = gpu_folder.replace("_", "-")
    return name if name in list_hardware() else None


def find_tables(gt: Path) -> tuple[list[Table], list[str]]:
    """(every aiconfigurator gemm/attention table of a GPU mpsim has a file for, the GPU folders
    skipped for want of one), in path order."""
    root = gt / "aiconfigurator"
    tables, skipped = [], []
    for gpu in sorted(p.name for p in root.iterdir() if p.is_dir()):
        paths = sorted(p for fam in FAMILIES for p in (root / gpu / fam).glob("*/*/*_perf.parquet"))
        if not paths:
            continue
        if hardware_of(gpu) is None:
            skipped.append(gpu)
            continue
        tables += [Table(gpu, p.parts[-4], p.parts[-3], p.parts[-2], p) for p in paths]
    return tables, skipped


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """The validation code that turns a table into priced rows (the simulator's is in namespace),
    read once per process: the code it imported."""
    here = Path(__file__).resolve().parent
    return fingerprint_files([here / f for f in ("adapter.py", "sources.py", "measured.py", "predict.py",
                                                 "against.py", "selections.py", "sampling.py")])


def table_key(t: Table, sample: int) -> str:
    hw = load_hardware(str(hardware_of(t.gpu)))
    h = hashlib.sha256(t.path.read_bytes())
    h.update(f"|{t.label}|{sample}|{SEED}|{SELECTION}|{_code_fingerprint()}|"
             f"{namespace(hw, DEFAULT_PARAMS, 'stacks-report')}".encode())
    return h.hexdigest()[:24]


def price_table(t: Table, sample: int, cache_dir: str | Path | None,
                progress: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the sampled rows, priced or with the status saying why not; the selected rows per class
    and kernel_source before sampling)."""
    m = apply_selection(read_measurements(t.path), SELECTION)
    inp = m.input.reset_index(drop=True)
    src = inp["kernel_source"].astype(str) if "kernel_source" in inp else pd.Series("", index=inp.index)
    sel = selected(m).to_numpy()
    counts = (pd.DataFrame({"cls": m.rows["cls"].to_numpy()[sel], "kernel_source": src.to_numpy()[sel]})
              .groupby(["cls", "kernel_source"]).size().rename("selected").reset_index())
    r = validate_against(stratified_sample(m, sample) if sel.any() else m, load_hardware(
        str(hardware_of(t.gpu))), cache_dir=cache_dir, progress=progress)
    frame = r.frame.copy()
    for col in DTYPES:
        frame[col] = inp[col].astype(str).to_numpy() if col in inp else ""
    frame = frame[~frame["status"].astype(str).str.startswith("skipped")]
    return frame[list(KEEP)].reset_index(drop=True), counts


def _tag(frame: pd.DataFrame, t: Table) -> pd.DataFrame:
    return frame.assign(gpu=t.gpu, framework=t.framework, version=t.version, stack=t.stack,
                        table=t.path.name)


def load_or_price(t: Table, sample: int, work: Path, cache_dir: str | Path | None,
                  progress: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table's priced rows and selection counts from `work` when already there, else priced now
    and written there (counts first, rows last: a rows file means the table is done)."""
    key = table_key(t, sample)
    rows_path, counts_path = work / f"{key}.rows.parquet", work / f"{key}.counts.parquet"
    if rows_path.is_file() and counts_path.is_file():
        return pd.read_parquet(rows_path), pd.read_parquet(counts_path)
    rows, counts = price_table(t, sample, cache_dir, progress)
    work.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(pa.Table.from_pandas(counts, preserve_index=False), counts_path)
    write_parquet_atomic(pa.Table.from_pandas(rows, preserve_index=False), rows_path)
    return rows, counts


def collect(tables: list[Table], sample: int, work: Path, cache_dir: str | Path | None,
            progress: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every table's sampled rows and selection counts, tagged with GPU, stack and table."""
    parts, counts = [], []
    with progress_bar(len(tables), "stacks report: tables", "table", progress) as bar:
        for t in tables:
            bar.set_postfix_str(t.label, refresh=True)
            r, c = load_or_price(t, sample, work, cache_dir, progress)
            parts.append(_tag(r, t))
            counts.append(_tag(c, t))
            bar.update(1)
    return pd.concat(parts, ignore_index=True), pd.concat(counts, ignore_index=True)


def fit_source(stack: str, others: dict[str, int]) -> str | None:
    """The stack whose rows fit the efficiency roofline applied to `stack`: another framework first,
    then another version of the same; the most priced rows, then by name (None: no other)."""
    framework = stack.split(" ")[0]
    cands = [s for s, n in others.items() if s != stack and n > 0]
    if not cands:
        return None
    return min(cands, key=lambda s: (s.split(" ")[0] == framework, -others[s], s))


def add_effroof(rows: pd.DataFrame) -> dict[tuple[str, str, str], tuple[float, float, float]]:
    """Columns `effroof_us` and `effroof_from` (the stack fitted on, or `own rows`): per GPU and
    class, the three constants fitted on another stack's priced rows (fit_source)."""
    rows["effroof_us"], rows["effroof_from"] = np.nan, ""
    ok = rows["status"] == "ok"
    fits: dict[tuple[str, str, str], tuple[float, float, float]] = {}
    for (gpu, cls), g in rows[ok].groupby(["gpu", "cls"], sort=True):
        sizes = g.groupby("stack").size().to_dict()
        for stack, h in g.groupby("stack", sort=True):
            src = fit_source(str(stack), sizes)
            key = (str(gpu), str(cls), src or f"own rows ({stack})")
            if key not in fits:
                f = h if src is None else g[g["stack"] == src]
                fits[key] = fit_eff_roofline(f["t_math_us"], f["t_mem_us"], f["measured_us"])
            rows.loc[h.index, "effroof_us"] = eff_roofline(h["t_math_us"], h["t_mem_us"], *fits[key])
            rows.loc[h.index, "effroof_from"] = src or "own rows"
    return fits


def _say(text: str) -> None:
    print(f"[stacks report] {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    from mpsim.analysis.validation.report_md import write_doc
    from mpsim.analysis.validation.stacks_md import BLOCKS, render

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    root = Path(__file__).resolve().parents[2]
    p.add_argument("--groundtruth", type=Path, default=root.parent / "shared" / "groundtruth")
    p.add_argument("--doc", type=Path, default=root / "docs" / "validation.md")
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                   help=f"rows priced per table at most, stratified (default {DEFAULT_SAMPLE})")
    p.add_argument("--work", type=Path, default=None,
                   help="per-table results (default <memo dir>/validation-stacks)")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE, help="the launch memo folder")
    p.add_argument("--only", default=None, help="only tables whose path contains this text")
    args = p.parse_args(argv)
    if args.sample < 1:
        raise SystemExit(f"--sample {args.sample}: expected at least 1 row per table")
    if not (args.groundtruth / "aiconfigurator").is_dir():
        raise SystemExit(f"no ground truth at {args.groundtruth} (docs/validation.md#the-data)")
    if not args.doc.is_file():
        raise SystemExit(f"{args.doc}: no such doc (the tables go between its markers)")
    write_doc(args.doc, dict.fromkeys(BLOCKS, ""), dry=True)  # a missing marker fails before any work
    tables, skipped = find_tables(args.groundtruth)
    if args.only:
        tables = [t for t in tables if args.only in t.label]
    work = args.work or default_cache_dir() / "validation-stacks"
    _say(f"{len(tables)} tables, at most {args.sample} rows each; per-table results in {work}")
    rows, counts = collect(tables, args.sample, work, args.cache_dir)
    add_effroof(rows)
    write_doc(args.doc, render(rows, counts, args.sample, skipped))
    print(f"wrote {args.doc} ({len(tables)} tables, {len(rows)} sampled rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
