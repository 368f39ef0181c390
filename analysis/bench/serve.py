"""The serving simulation's benchmarks: its speed, and the error its pricing shortcuts add.

speed: vicuna-7b on h200-sxm, prompt 512, 256 new tokens, the simulator. First the saturation
rate, measured in this run: 1,500 requests offered at 10x what the engine can take, throughput over
the middle 60% of them (warm-up and cool-down left out). Then 10,000 requests at 90% of it, twice:
with a fresh pricer (nothing priced yet: the cold figure) and with the saturation run's pricer
(warm). Wall seconds, iterations, simulate calls, what the run measured.

capacity: vicuna-7b 3072 + 1024 tokens on h200-sxm per KV and weight format: the block arithmetic
and the concurrency and preemptions a crowded run shows.

error: mixed runs (chunked prefill over many lengths, progressive policies) with every k-th
iteration also priced as its exact launch list through one `simulate` call (no components, no
buckets), and one run repeated with exact pricing throughout, compared on its summary figures.

Writes analysis/results/serve_speed.csv, serve_capacity.csv, serve_pricing_error.csv and the tables
between the markers of docs/serving.md.

    python -m mpsim.analysis.bench.serve [--part speed error capacity] [--policies fp16 w4+kv8]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mpsim.hw_models.loader import load_hardware
from mpsim.models import get_model
from mpsim.policy import parse_policy
from mpsim.serve.arrivals import build_requests
from mpsim.serve.config import Buckets, SchedulerConfig, ServeConfig
from mpsim.serve.engine import make_pricer, run_serve
from mpsim.serve.pricing import IterationPricer
from mpsim.traces.atomic import write_csv_atomic, write_text_atomic

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "analysis" / "results"
DOC = ROOT / "docs" / "serving.md"
MODEL, HW = "vicuna-7b", "h200-sxm"
SATURATION_REQUESTS, RUN_REQUESTS, LOAD = 1500, 10_000, 0.9


def _run(policy: str, rate: float, n: int, pricer: IterationPricer | None, cfg: ServeConfig,
         prompt: Any = 512, gen: Any = 256, audit: int = 0, seed: int = 0) -> tuple[dict[str, Any], float]:
    spec = get_model(MODEL)
    reqs = build_requests(spec, rate=rate, requests=n, prompt_len=prompt, gen_len=gen, seed=seed)
    t0 = time.perf_counter()
    res = run_serve(spec, parse_policy(policy), load_hardware(HW), reqs, cfg, pricer=pricer,
                    audit_every=audit)
    return res.summary, time.perf_counter() - t0


def speed(policy: str) -> dict[str, Any]:
    spec, hw, pol = get_model(MODEL), load_hardware(HW), parse_policy(policy)
    sat_cfg = ServeConfig(warmup_frac=0.2, cooldown_frac=0.2)
    pricer = make_pricer(spec, pol, hw, sat_cfg)
    sat, sat_wall = _run(policy, 200.0, SATURATION_REQUESTS, pricer, sat_cfg)
    rate = LOAD * sat["throughput_rps"]
    cold, cold_wall = _run(policy, rate, RUN_REQUESTS, None, ServeConfig())
    _, warm_wall = _run(policy, rate, RUN_REQUESTS, pricer, ServeConfig())
    return {
        "model": MODEL, "hw": HW, "policy": policy, "perf_model": "sim", "prompt_len": 512, "gen_len": 256,
        "saturation_rps": sat["throughput_rps"], "saturation_wall_s": sat_wall, "rate_rps": rate,
        "requests": RUN_REQUESTS, "cold_wall_s": cold_wall, "warm_wall_s": warm_wall,
        "iterations": cold["iterations"], "simulate_calls": cold["pricing"]["simulate_calls"],
        "components": cold["pricing"]["components"], "simulate_s": cold["pricing"]["simulate_s"],
        "throughput_rps": cold["throughput_rps"], "ttft_p99_s": cold["ttft_p99_s"],
        "tpot_p50_s": cold["tpot_p50_s"], "tpot_p99_s": cold["tpot_p99_s"],
        "peak_concurrent_sequences": cold["peak_concurrent_sequences"], "load_before": os.getloadavg()[0],
    }


ERROR_CASES = (  # (label, policy, perf model, rate, requests, prompt, gen, budget)
    ("fixed lengths, 90% load", "fp16", "sim", 20.0, 400, 512, 256, None),
    ("lognormal lengths, chunks of 1024", "w4+kv8", "sim", 12.0, 300, "lognormal:700:0.8",
     "lognormal:150:0.8", 1024),
    ("two precisions in a batch", "ap4-4@64-3+kv8", "sim", 12.0, 300, "lognormal:700:0.8",
     "lognormal:150:0.8", 1024),
    ("lognormal lengths (roofline)", "w4+kv8", "roofline", 12.0, 300, "lognormal:700:0.8",
     "lognormal:150:0.8", 1024),
)


def error_rows(audit_every: int = 10) -> list[dict[str, Any]]:
    rows = []
    for label, policy, pm, rate, n, prompt, gen, budget in ERROR_CASES:
        cfg = ServeConfig(scheduler=SchedulerConfig(max_num_batched_tokens=budget), perf_model=pm)
        s, wall = _run(policy, rate, n, None, cfg, prompt, gen, audit_every)
        a = s["pricing"]["audit"]
        rows.append({"case": label, "policy": policy, "perf_model": pm, "rate_rps": rate, "requests": n,
                     "audited": a["iterations"], "mean_abs_rel": a["mean_abs_rel"],
                     "max_abs_rel": a["max_abs_rel"], "total_rel": a["total_rel"], "wall_s": wall,
                     "iterations": s["iterations"], "components": s["pricing"]["components"]})
    return rows


def exact_comparison(policy: str = "w4+kv8", n: int = 200) -> dict[str, Any]:
    """One mixed run priced with and without buckets: what the summary figures move by."""
    out: dict[str, Any] = {"policy": policy, "requests": n}
    for name, buckets in (("bucketed", Buckets()), ("exact", Buckets(enabled=False))):
        cfg = ServeConfig(scheduler=SchedulerConfig(max_num_batched_tokens=1024), buckets=buckets)
        s, wall = _run(policy, 12.0, n, None, cfg, "lognormal:700:0.8", "lognormal:150:0.8")
        out.update({f"{name}_{k}": s[k] for k in ("throughput_rps", "ttft_p50_s", "ttft_p99_s",
                                                   "tpot_p50_s", "tpot_p99_s", "e2e_mean_s")})
        out[f"{name}_wall_s"] = wall
    return out


CAPACITY = (("fp16", 90), ("fp16+kv8", 170), ("fp16+kv4", 330), ("w4", 95), ("w4+kv8", 175))


def capacity_rows(perf_model: str = "sim") -> list[dict[str, Any]]:
    """vicuna-7b, 3072-token prompts and 1024 new (its whole 4096-token context) on h200-sxm, more
    requests at once than the cache holds; max_num_seqs 512 so that memory, not seats, binds."""
    rows = []
    for policy, n in CAPACITY:
        cfg = ServeConfig(scheduler=SchedulerConfig(max_num_seqs=512), perf_model=perf_model)
        spec = get_model(MODEL)
        reqs = build_requests(spec, rate=1e6, requests=n, prompt_len=3072, gen_len=1024)
        t0 = time.perf_counter()
        res = run_serve(spec, parse_policy(policy), load_hardware(HW), reqs, cfg)
        s, cap = res.summary, res.capacity
        rows.append({"policy": policy, "requests": n, "weights_GB": cap.weights_bytes / 1e9,
                     "kv_KiB_per_token": cap.kv_bytes_per_token / 1024, "kv_blocks": cap.num_blocks,
                     "kv_tokens": cap.tokens, "full_length_sequences": cap.tokens // 4096,
                     "prompt_admissible": (cap.num_blocks - cap.watermark_blocks) // 192,
                     "peak_concurrent_sequences": s["peak_concurrent_sequences"],
                     "preemptions": s["preemptions"], "preempted_requests": s["preempted_requests"],
                     "throughput_rps": s["throughput_rps"], "wall_s": time.perf_counter() - t0})
    return rows


def _md(table: pd.DataFrame, columns: dict[str, str], fmt: dict[str, str]) -> str:
    head = "| " + " | ".join(columns.values()) + " |\n|" + "---|" * len(columns) + "\n"
    lines = ["| " + " | ".join(format(r[c], fmt.get(c, "")) for c in columns) + " |"
             for _, r in table.iterrows()]
    return head + "\n".join(lines)


def update_doc(marker: str, text: str) -> None:
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    doc = DOC.read_text() if DOC.is_file() else ""
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        write_text_atomic(head + begin + "\n" + text + "\n" + end + rest.split(end, 1)[1], DOC)


TABLES = {  # csv -> (doc marker, columns, formats)
    "serve_speed.csv": ("serve-speed", {
        "policy": "policy", "saturation_rps": "saturation (req/s)", "rate_rps": "rate (req/s)",
        "cold_wall_s": "10k requests, cold (s)", "warm_wall_s": "warm (s)", "iterations": "iterations",
        "simulate_calls": "simulate calls", "simulate_s": "cold: in simulate (s)",
        "throughput_rps": "throughput (req/s)", "tpot_p99_s": "p99 TPOT (s)", "load_before": "load before"},
        {"saturation_rps": ".2f", "rate_rps": ".2f", "cold_wall_s": ".1f", "warm_wall_s": ".1f",
         "simulate_s": ".1f", "throughput_rps": ".2f", "tpot_p99_s": ".4f", "load_before": ".1f"}),
    "serve_capacity.csv": ("serve-capacity", {
        "policy": "policy", "weights_GB": "weights (GB)", "kv_KiB_per_token": "KV per token (KiB)",
        "kv_blocks": "KV blocks", "full_length_sequences": "4096-token sequences that fit",
        "prompt_admissible": "3072-token prompts admissible",
        "peak_concurrent_sequences": "peak concurrent (measured)", "preemptions": "preemptions"},
        {"weights_GB": ".2f", "kv_KiB_per_token": ".0f"}),
    "serve_pricing_error.csv": ("serve-error", {
        "case": "case", "policy": "policy", "perf_model": "perf model", "audited": "iterations audited",
        "mean_abs_rel": "mean abs error", "max_abs_rel": "max abs error", "total_rel": "total time error"},
        {c: ".3%" for c in ("mean_abs_rel", "max_abs_rel", "total_rel")}),
}


def write_table(rows: list[dict[str, Any]], csv: str) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    write_csv_atomic(table, RESULTS / csv, index=False, float_format="%.6g")
    doc_tables([csv])
    print(table.to_string())
    return table


def doc_tables(csvs: Sequence[str] = tuple(TABLES)) -> None:
    """The docs/serving.md tables from the result CSVs (after a run, or alone with --tables)."""
    for csv in csvs:
        if (RESULTS / csv).is_file():
            marker, columns, fmt = TABLES[csv]
            update_doc(marker, _md(pd.read_csv(RESULTS / csv), columns, fmt))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", nargs="+", default=["speed", "error", "capacity"],
                    choices=("speed", "error", "capacity"))
    ap.add_argument("--policies", nargs="+", default=["fp16", "w4+kv8"])
    ap.add_argument("--tables", action="store_true", help="only rewrite the doc tables from the CSVs")
    args = ap.parse_args(argv)
    if args.tables:
        doc_tables()
        return 0
    if "speed" in args.part:
        write_table([speed(p) for p in args.policies], "serve_speed.csv")
    if "capacity" in args.part:
        write_table(capacity_rows(), "serve_capacity.csv")
    if "error" in args.part:
        write_table(error_rows(), "serve_pricing_error.csv")
        exact = exact_comparison()
        write_csv_atomic(pd.DataFrame([exact]), RESULTS / "serve_pricing_exact.csv", index=False,
                         float_format="%.6g")
        print(pd.Series(exact).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
