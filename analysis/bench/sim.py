"""The simulator's speed benchmark: vicuna-7b, prompt 512, 2048 new tokens, batch 1, ap4-4@680-3.

For each hardware model: synthesize the trace (not part of simulate time, reported beside it), then
simulate it cold (an empty on-disk memo) and warm (a new process-level memo over the filled disk
memo, as a second `mpsim simulate` would see it); medians of `--runs` runs. Writes
analysis/results/sim_speed.csv and the markdown table between the bench markers of
docs/simulator.md.

    python -m mpsim.analysis.bench.sim [--runs 3] [--hw h200-sxm npu-llm]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.sim import simulate
from mpsim.synth import synthesize
from mpsim.traces.atomic import write_csv_atomic, write_text_atomic
from mpsim.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "analysis" / "results" / "sim_speed.csv"
DOC = ROOT / "docs" / "simulator.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
MODEL, POLICY, WORKLOAD = "vicuna-7b", "ap4-4@680-3", Workload(512, 2048, 1)


def bench_one(hw_name: str, runs: int) -> dict[str, object]:
    spec, policy, hw = get_model(MODEL), parse_policy(POLICY), load_hardware(hw_name)
    synth_s: list[float] = []
    cold_s: list[float] = []
    warm_s: list[float] = []
    simpy_s: list[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        trace = synthesize(spec, policy, WORKLOAD)
        t1 = time.perf_counter()
        with tempfile.TemporaryDirectory() as cache:
            cold = simulate(trace, hw, cache_dir=cache)
            t2 = time.perf_counter()
            warm = simulate(trace, hw, cache_dir=cache)
            t3 = time.perf_counter()
        synth_s.append(t1 - t0)
        simpy_s.append(cold.stats["simpy_s"])
        cold_s.append(t2 - t1)
        warm_s.append(t3 - t2)
    launches, simulated, s = len(trace.rows), cold.stats["simulated"], warm.summary
    cold_m, warm_m = statistics.median(cold_s), statistics.median(warm_s)
    return {
        "hw": hw_name, "model": MODEL, "policy": POLICY, "prompt_len": WORKLOAD.prompt_len,
        "gen_len": WORKLOAD.gen_len, "batch": WORKLOAD.batch, "runs": runs, "launches": launches,
        "distinct_launches": simulated, "synth_s": statistics.median(synth_s), "cold_s": cold_m,
        "warm_s": warm_m, "launches_per_s_cold": launches / cold_m,
        "launches_per_s_warm": launches / warm_m,
        "simpy_s": statistics.median(simpy_s),
        "simpy_launches_per_s": simulated / statistics.median(simpy_s),
        "ttft_ms": s.ttft_s * 1e3, "tpot_ms": s.tpot_mean_s * 1e3, "tokens_per_s": s.tokens_per_s,
    }


def markdown(table: pd.DataFrame) -> str:
    lines = [
        "| hw | launches | distinct | synth (s) | simulate cold (s) | simulate warm (s) | "
        "of which SimPy (s) | launches/s cold | launches/s warm | SimPy launches/s | TTFT (ms) | "
        "TPOT (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.hw} | {r.launches:,} | {r.distinct_launches} | {r.synth_s:.2f} | {r.cold_s:.2f} | "
            f"{r.warm_s:.2f} | {r.simpy_s:.2f} | {r.launches_per_s_cold:,.0f} | "
            f"{r.launches_per_s_warm:,.0f} | "
            f"{r.simpy_launches_per_s:,.0f} | {r.ttft_ms:.2f} | {r.tpot_ms:.3f} |")
    return "\n".join(lines)


def update_doc(doc: Path, table_md: str, runs: int) -> None:
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    note = (f"\n{MODEL}, prompt {WORKLOAD.prompt_len}, {WORKLOAD.gen_len} new tokens, batch "
            f"{WORKLOAD.batch}, policy `{POLICY}`; medians of {runs} runs "
            f"(`python -m mpsim.analysis.bench.sim`).\n\n")
    write_text_atomic(f"{head}{BEGIN}{note}{table_md}\n{END}{tail}", doc)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hw", nargs="+", default=["h200-sxm", "npu-llm"])
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--doc", default=str(DOC), help="markdown file with the bench markers ('' to skip)")
    args = p.parse_args(argv)
    table = pd.DataFrame([bench_one(h, args.runs) for h in args.hw])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, args.out, index=False)
    md = markdown(table)
    print(md)
    if args.doc:
        update_doc(Path(args.doc), md, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
