"""What a serving run reports: per-request and per-iteration tables, the summary, files, a timeline.

Per request (as vLLM's benchmark defines them): TTFT = first token - arrival; TPOT = (finish - first
token) / (gen_len - 1) (NaN for one-token outputs); E2E = finish - arrival. The summary gives
throughput (requests/s and output tokens/s over the run: from the first arrival to the last
finish; with warm-up/cool-down left out, the rate the counted requests finish at), TTFT/TPOT/E2E
mean and p50/p90/p99 (numpy's linear percentiles), goodput (requests per second meeting every SLO
given), whether each p99 meets its SLO, preemptions, and
`peak_concurrent_sequences` (sequences holding KV blocks at once). `warmup_frac`/`cooldown_frac`
leave the first/last requests by arrival out of the steady-state figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mpsim.serve.arrivals import Requests
from mpsim.serve.config import IterationProtocols, ServeConfig
from mpsim.serve.kv import KvCapacity
from mpsim.serve.scheduler import Scheduler, Step
from mpsim.traces.atomic import atomic_write, write_json_atomic
from mpsim.traces.atomic_folder import atomic_folder

ITERATION_COLUMNS = ("start_s", "time_s", "protocol", "decode_seqs", "prefill_seqs", "prefill_tokens",
                     "tokens", "batch", "running", "waiting", "in_system", "kv_blocks_used",
                     "preempted", "launches")
PERCENTILES = (50, 90, 99)


class IterationLog:
    """One row per iteration, appended as the engine plans it (state after admission); `protocol`
    is the measurement protocol the iteration was priced under."""

    def __init__(self, protocols: IterationProtocols) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.protocols = protocols

    def add(self, start: float, seconds: float, step: Step, sched: Scheduler, launches: int) -> None:
        dec, pre = len(step.decode), len(step.prefill)
        self.rows.append((start, seconds, self.protocols.name(pre > 0), dec, pre, step.prefill_tokens,
                          dec + step.prefill_tokens, dec + pre, len(sched.running), len(sched.waiting),
                          sched.in_system, sched.kv_blocks_used, step.preempted, launches))

    def table(self, num_blocks: int) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=list(ITERATION_COLUMNS))
        frame["kv_blocks_total"] = num_blocks
        frame["kv_occupancy"] = frame["kv_blocks_used"] / num_blocks
        return frame


def request_table(reqs: Requests, s: Scheduler) -> pd.DataFrame:
    first, finish = s.first_token_s, s.finish_s
    gen = reqs.gen_len
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(gen > 1, (finish - first) / (gen - 1), np.nan)
    return pd.DataFrame({
        "request_id": np.arange(len(reqs)), "arrival_s": reqs.arrival_s,
        "prompt_len": reqs.prompt_len, "gen_len": gen, "switch_step": reqs.switch_step,
        "scheduled_s": s.scheduled_s, "first_token_s": first, "finish_s": finish,
        "ttft_s": first - reqs.arrival_s, "tpot_s": tpot, "e2e_s": finish - reqs.arrival_s,
        "queue_s": s.scheduled_s - reqs.arrival_s, "preemptions": s.preemptions,
    })


def _stats(values: pd.Series, name: str) -> dict[str, float]:
    v = values.dropna().to_numpy(dtype=float)
    out = {f"{name}_mean_s": float(v.mean()) if len(v) else float("nan")}
    for q in PERCENTILES:
        out[f"{name}_p{q}_s"] = float(np.percentile(v, q)) if len(v) else float("nan")
    return out


def steady(requests: pd.DataFrame, cfg: ServeConfig) -> pd.DataFrame:
    """The requests counted in the steady-state figures (by arrival order)."""
    n = len(requests)
    lo, hi = int(cfg.warmup_frac * n), n - int(cfg.cooldown_frac * n)
    return requests.sort_values("arrival_s", kind="stable").iloc[lo:max(hi, lo + 1)]


def summarize(requests: pd.DataFrame, iterations: pd.DataFrame, cfg: ServeConfig, reqs: Requests,
              cap: KvCapacity, pricing: dict[str, Any], info: dict[str, Any],
              wall_s: float) -> dict[str, Any]:
    kept = steady(requests, cfg)
    whole = float(requests["finish_s"].max() - requests["arrival_s"].min())
    if cfg.warmup_frac or cfg.cooldown_frac:  # steady state: the rate the kept requests finish at
        window = float(kept["finish_s"].max() - kept["finish_s"].min())
        span = window * len(kept) / (len(kept) - 1) if len(kept) > 1 else float("nan")
    else:  # vLLM's benchmark: from the first arrival to the last completion
        span = whole
    span = span if span > 0 else float("nan")
    out: dict[str, Any] = {**info, "requests": len(requests), "requests_counted": len(kept),
                           "arrivals": reqs.source, "lengths_cut_to_context": reqs.clipped,
                           "beyond_context": reqs.beyond,
                           "duration_s": span,
                           "throughput_rps": len(kept) / span,
                           "output_tokens_per_s": float(kept["gen_len"].sum()) / span,
                           "input_tokens_per_s": float(kept["prompt_len"].sum()) / span}
    for col in ("ttft", "tpot", "e2e"):
        out.update(_stats(kept[f"{col}_s"], col))
    out.update(_slo(kept, cfg, span))
    busy = iterations["time_s"].sum()
    out.update({
        "preemptions": int(requests["preemptions"].sum()),
        "preempted_requests": int((requests["preemptions"] > 0).sum()),
        "peak_concurrent_sequences": int(iterations["running"].max()) if len(iterations) else 0,
        "mean_batch": float(np.average(iterations["batch"], weights=iterations["time_s"])) if busy else 0.0,
        "peak_kv_occupancy": float(iterations["kv_occupancy"].max()) if len(iterations) else 0.0,
        "mean_in_system": float((iterations["in_system"] * iterations["time_s"]).sum() / whole),
        "iterations": len(iterations), "busy_s": float(busy),
        "kv_capacity": cap.as_dict(), "config": cfg.as_dict(), "pricing": pricing, "wall_s": wall_s,
    })
    out["devices"] = cfg.tp * cfg.pp  # a parallel plan's GPUs: throughput per GPU beside the total
    out["output_tokens_per_s_per_device"] = out["output_tokens_per_s"] / out["devices"]
    return out


def _slo(kept: pd.DataFrame, cfg: ServeConfig, span: float) -> dict[str, Any]:
    slo = cfg.slo
    ok = np.ones(len(kept), dtype=bool)
    out: dict[str, Any] = {"slo_ttft_s": slo.ttft_s, "slo_tpot_s": slo.tpot_s}
    for name, limit in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s)):
        if limit is None:
            continue
        values = kept[f"{name}_s"].to_numpy(dtype=float)
        ok &= np.isnan(values) | (values <= limit)
        p99 = np.nanpercentile(values, 99) if np.isfinite(values).any() else float("nan")
        out[f"slo_{name}_p99_met"] = bool(p99 <= limit)
    out["slo_attainment"] = float(ok.mean()) if slo.given else float("nan")
    out["goodput_rps"] = float(ok.sum()) / span if slo.given else float("nan")
    out["slo_met"] = all(v for k, v in out.items() if k.endswith("_p99_met")) if slo.given else None
    return out


OUTPUT_FILES = ("requests.parquet", "iterations.parquet", "summary.json", "timeline.json")


def write_outputs(folder: str | Path, requests: pd.DataFrame, iterations: pd.DataFrame,
                  summary: dict[str, Any], timeline: bool = False) -> list[Path]:
    """The run's files in `folder`, which is replaced as a whole (never a mix of two runs)."""
    target = Path(folder)
    with atomic_folder(target, OUTPUT_FILES) as tmp:
        atomic_write(tmp / "requests.parquet", lambda t: requests.to_parquet(t, index=False))
        atomic_write(tmp / "iterations.parquet", lambda t: iterations.to_parquet(t, index=False))
        write_json_atomic(_plain(summary), tmp / "summary.json")
        if timeline:
            write_json_atomic(timeline_events(iterations, summary), tmp / "timeline.json")
    return [target / name for name in OUTPUT_FILES if timeline or name != "timeline.json"]


def _plain(value: Any) -> Any:
    """JSON-ready: NaN -> None, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def timeline_events(iterations: pd.DataFrame, summary: dict[str, Any]) -> dict[str, Any]:
    """Chrome trace events (Perfetto): one slice per iteration, counters for batch and KV blocks."""
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1,
                                     "args": {"name": f"{summary['model']} {summary['policy']} on "
                                              f"{summary['hw']} (mpsim serve)"}}]
    for r in iterations.itertuples(index=False):
        ts, dur = r.start_s * 1e6, r.time_s * 1e6
        label = f"{r.decode_seqs} decode + {r.prefill_tokens} prefill tokens"
        events.append({"name": label, "ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "cat": r.protocol, "args": {"batch": r.batch, "launches": r.launches,
                                                   "preempted": r.preempted}})
        events.append({"name": "sequences", "ph": "C", "pid": 1, "ts": ts,
                       "args": {"running": r.running, "waiting": r.waiting}})
        events.append({"name": "KV blocks used", "ph": "C", "pid": 1, "ts": ts,
                       "args": {"blocks": r.kv_blocks_used}})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": json.loads(
        json.dumps(_plain({k: summary[k] for k in ("model", "policy", "hw", "perf_model")})))}


def format_summary(s: dict[str, Any]) -> str:
    cap, pr = s["kv_capacity"], s["pricing"]
    ms = 1e3

    def row(name: str, key: str, scale: float, unit: str) -> str:
        vals = [s[f"{key}_{q}_s"] * scale for q in ("mean", "p50", "p90", "p99")]
        return (f"  {name:<6}{unit:<4}      mean {vals[0]:9.2f}   p50 {vals[1]:9.2f}   "
                f"p90 {vals[2]:9.2f}   p99 {vals[3]:9.2f}")

    devices = int(s.get("devices", 1))
    plan = f" x {devices} (tp {s.get('tp', 1)} x pp {s.get('pp', 1)})" if devices > 1 else ""
    per_device = (f", {s['output_tokens_per_s_per_device']:.0f} per GPU" if devices > 1 else "")
    lines = [
        f"mpsim serve: {s['model']} {s['policy']} on {s['hw']}{plan} ({s['perf_model']}), {s['requests']} "
        f"requests ({s['arrivals']})",
        f"  throughput        {s['throughput_rps']:.3f} req/s, {s['output_tokens_per_s']:.0f} output tok/s"
        f"{per_device} over {s['duration_s']:.1f} s ({s['requests_counted']} requests counted)",
        row("TTFT", "ttft", ms, "ms"), row("TPOT", "tpot", ms, "ms"), row("E2E", "e2e", 1.0, "s"),
        f"  KV cache          {cap['num_blocks']:,} blocks of {cap['block_size']} tokens "
        f"({cap['num_blocks'] * cap['block_size']:,} tokens, {cap['kv_bytes_per_token'] / 1024:g} KiB "
        f"per token{' per device' if devices > 1 else ''}); peak {s['peak_kv_occupancy']:.0%} used, "
        f"peak {s['peak_concurrent_sequences']} sequences",
        f"  preemptions       {s['preemptions']} ({s['preempted_requests']} requests)",
    ]
    if s.get("slo_met") is not None:
        goals = ", ".join(f"{k.upper()} <= {s[f'slo_{k}_s'] * ms:g} ms" for k in ("ttft", "tpot")
                          if s.get(f"slo_{k}_s") is not None)
        verdict = "met" if s["slo_met"] else "NOT MET"
        lines.append(f"  SLO               {goals}: p99 {verdict}; attainment {s['slo_attainment']:.1%}, "
                     f"goodput {s['goodput_rps']:.3f} req/s")
    audit = pr.get("audit")
    lines.append(f"  pricing           {pr['iterations']:,} iterations, {pr['signature_hits']:,} signature "
                 f"hits, {pr['components']} components in {pr['simulate_calls']} simulate calls "
                 f"({pr['simulate_s']:.1f} s)")
    if audit:
        lines.append(f"  pricing audit     {audit['iterations']} iterations vs their exact launch list: "
                     f"mean |error| {audit['mean_abs_rel']:.3%}, max {audit['max_abs_rel']:.3%}, "
                     f"total time {audit['total_rel']:+.3%}")
    lines.append(f"  wall              {s['wall_s']:.1f} s")
    return "\n".join(lines)
