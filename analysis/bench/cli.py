"""The command line as a user meets it: process wall time and peak memory of `mpsim` commands.

Every case runs `mpsim ...` as a child process, the way a user's shell does, and records its wall
time (start of the process to its exit: interpreter start-up, imports, the work, writing files) and
its peak resident memory (the child's own rusage, `os.wait4`; Linux counts in it the memory of the
forking process, so this one imports nothing heavy until the runs are done). Cases:

- `mpsim --help`; `mpsim op gemm` (one GEMV priced with the default config);
- vicuna-7b, prompt 512, 2048 new tokens, `ap4-4@680-3` on h200-sxm: `synth`, then `simulate` with a
  cold launch memo (an empty memo folder) and warm (the same folder again, as a second run sees it);
- llama-3-8b, prompt 2048, 6144 new tokens (its whole 8192-token context), batch 8, the same policy:
  `synth`, `simulate` cold and warm;
- with `--sweep`: the default sweep (`mpsim sweep analysis/specs/default.yaml --workers 2`, a fresh
  output folder and memo), reported as points per minute.

`--before DIR` also runs every case with the `mpsim` of another checkout (DIR/.venv/bin/mpsim, e.g. a
clone of the starting commit), interleaved with this one run by run, so that a busy machine slows
both alike. Medians of `--runs` runs; the load average is recorded before every run. Writes
analysis/results/cli_speed.csv and the table between the cli-bench markers of docs/simulator.md.

    python -m mpsim.analysis.bench.cli [--runs 5] [--before /tmp/mpsim-before] [--sweep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mpsim.traces.atomic import write_csv_atomic, write_text_atomic

if TYPE_CHECKING:
    import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "analysis" / "results" / "cli_speed.csv"
DOC = ROOT / "docs" / "simulator.md"
BEGIN, END = "<!-- cli-bench:begin -->", "<!-- cli-bench:end -->"
POLICY, HW = "ap4-4@680-3", "h200-sxm"
RUNS = {"vicuna": ("vicuna-7b", 512, 2048, 1), "llama3": ("llama-3-8b", 2048, 6144, 8)}
QUICK = {"vicuna": ("mobilellama-1.4b", 32, 8, 1), "llama3": ("qwen2.5-1.5b", 16, 8, 2)}  # --quick
SWEEP_POINTS = 432  # the default sweep: 3 models x 9 policies x 4 devices x 2 workloads x 2 models


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # after `mpsim`; {trace}, {out} and {spec} are filled in per run
    memo: str = "none"  # "cold": a fresh memo folder; "warm": the folder the cold run filled


def cases(sweep: bool, workloads: dict[str, tuple[str, int, int, int]] = RUNS) -> list[Case]:
    out = [Case("mpsim --help", ("--help",)),
           Case("mpsim op gemm (GEMV, default config)",
                ("op", "gemm", "--m", "1", "--n", "11008", "--k", "4096", "--w-format", "group",
                 "--bits", "4", "--hw", HW))]
    for key, (model, prompt, gen, batch) in workloads.items():
        label = f"{model} {prompt}+{gen}" + (f" b{batch}" if batch > 1 else "")
        out.append(Case(f"{label}: synth", ("synth", "--model", model, "--policy", POLICY, "--prompt-len",
                                            str(prompt), "--gen-len", str(gen), "--batch", str(batch),
                                            "--out", "{trace_" + key + "}")))
        for memo in ("cold", "warm"):
            out.append(Case(f"{label}: simulate ({memo} memo)",
                            ("simulate", "{trace_" + key + "}", "--hw", HW), memo))
    if sweep:
        out.append(Case("default sweep (2 workers, cold memo)",
                        ("sweep", "{spec}", "--out", "{out}", "--workers", "2", "--no-progress"), "cold"))
    return out


def run_child(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of one child process."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            text = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv)} failed ({code}): {text}")
    return wall, usage.ru_maxrss / 1024, code


@dataclass
class Checkout:
    label: str
    root: Path
    work: Path  # traces, memo folders, sweep outputs of this checkout

    def commit(self) -> str:
        done = subprocess.run(["git", "-C", str(self.root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True)
        return done.stdout.strip() or str(self.root)

    @property
    def mpsim(self) -> str:
        return str(self.root / ".venv" / "bin" / "mpsim")

    def fill(self, arg: str) -> str:
        return arg.format(trace_vicuna=self.work / "vicuna.parquet",
                          trace_llama3=self.work / "llama3.parquet", out=self.work / "sweep",
                          spec=self.root / "analysis" / "specs" / "default.yaml")


def measure(case: Case, co: Checkout, run: int) -> dict[str, object]:
    env = dict(os.environ)
    memo = co.work / f"memo-{case.name.split(':')[0].replace(' ', '_')}"
    if case.memo == "cold":
        shutil.rmtree(memo, ignore_errors=True)
        shutil.rmtree(co.work / "sweep", ignore_errors=True)
    env["MPSIM_CACHE_DIR"] = str(memo)
    load = os.getloadavg()[0]
    wall, rss, _ = run_child([co.mpsim, *(co.fill(a) for a in case.args)], env)
    row: dict[str, object] = {"code": co.label, "case": case.name, "run": run, "wall_s": round(wall, 3),
                              "peak_rss_mb": round(rss, 1), "load_avg_1min": round(load, 2)}
    if case.args[0] == "sweep":
        row["points_per_min"] = round(60 * SWEEP_POINTS / wall, 1)
    print(row, flush=True)
    return row


def bench(checkouts: list[Checkout], runs: int, sweep: bool, quick: bool = False) -> pd.DataFrame:
    """Every case, run by run, each checkout in turn (a warm case follows its cold one)."""
    rows = []
    all_cases = cases(sweep, QUICK if quick else RUNS)
    for run in range(runs):
        for case in all_cases:
            if case.args[0] == "sweep" and run >= max(1, runs // 2):
                continue  # a sweep takes a minute or more: half the runs
            for co in checkouts:
                rows.append(measure(case, co, run))
    # pandas loads only now: a child's peak RSS (rusage) counts the memory of the process that
    # forked it, so this one stays small (~10 MB) while it measures
    import pandas as pd

    table = pd.DataFrame(rows)
    table["cpus"] = os.cpu_count()
    table["date"] = time.strftime("%Y-%m-%d")
    return table


def markdown(table: pd.DataFrame) -> str:
    codes = list(dict.fromkeys(table["code"]))
    head = "| case | " + " | ".join(f"{c}: wall s | {c}: peak MB" for c in codes) + " | load avg |"
    lines = [head, "|---|" + "---|---|" * len(codes) + "---|"]
    for case, sel in table.groupby("case", sort=False):
        cells = []
        for c in codes:
            mine = sel[sel["code"] == c]
            wall = statistics.median(mine["wall_s"])
            extra = f" ({60 * SWEEP_POINTS / wall:.0f} points/min)" if "sweep" in str(case) else ""
            cells.append(f"{wall:.2f}{extra} | {statistics.median(mine['peak_rss_mb']):.0f}")
        loads = sel["load_avg_1min"]
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {loads.min():.1f}-{loads.max():.1f} |")
    return "\n".join(lines)


def update_doc(doc: Path, table_md: str, runs: int, checkouts: list[Checkout]) -> None:
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    who = ", ".join(f"{c.label} = commit {c.commit()}" for c in checkouts)
    note = (f"\nProcess wall time and peak RSS of each command as a child process, medians of {runs} "
            f"runs ({who}; `python -m mpsim.analysis.bench.cli`), on {os.cpu_count()} cores; the last "
            "column is the 1-minute load average seen before the runs.\n\n")
    write_text_atomic(f"{head}{BEGIN}{note}{table_md}\n{END}{tail}", doc)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--before", type=Path, default=None,
                   help="another checkout with its own .venv (e.g. a clone of the starting commit)")
    p.add_argument("--sweep", action="store_true", help="also time the default sweep (minutes)")
    p.add_argument("--quick", action="store_true", help="tiny workloads (checks the benchmark itself)")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--doc", default=str(DOC), help="markdown file with the cli-bench markers ('' to skip)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mpsim-cli-bench-") as tmp:
        checkouts = [Checkout("before", args.before.resolve(), Path(tmp) / "before")] if args.before else []
        checkouts.append(Checkout("after" if args.before else "this", ROOT, Path(tmp) / "this"))
        for co in checkouts:
            co.work.mkdir(parents=True)
        table = bench(checkouts, args.runs, args.sweep, args.quick)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, args.out, index=False)
    md = markdown(table)
    print(md)
    if args.doc:
        update_doc(Path(args.doc), md, args.runs, checkouts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
