"""The `serve:` section of a sweep spec: serving runs over request rates, crossed with models x
policies x hardware, resumable and Dask-able like the kernel-level points; their own table.

    serve:
      rates: [2, 4, 8, 16]          # requests/s, one point each (required)
      requests: 500                 # or duration_s: 120
      arrivals: poisson             # or gamma:CV
      prompt_len: 512               # N, uniform:LO:HI or lognormal:MEDIAN:SIGMA[:MAX]
      gen_len: 256
      seed: 0
      slo_ttft_ms: 1000             # optional
      slo_tpot_ms: 50               # optional
      perf_model: sim               # optional (default sim)
      max_num_seqs: 256             # optional scheduler knobs (mpsim serve's flags)
      max_num_batched_tokens: 4096
      block_size: 16
      chunked_prefill: true
      mixed_precision: per-group

A task is one (model, policy, engine, hardware) with its pending rates, run in one process with one pricer
(prices are shared across rates). Points land in DIR/serve_points/<key>.parquet; the merged table is
DIR/serve_results.parquet, one row per point with the run's summary figures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from mpsim.analysis.sweep.store import PointStore
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec
from mpsim.serve.arrivals import arrival_kind, parse_lengths
from mpsim.serve.config import SchedulerConfig, ServeConfig, Slo
from mpsim.sim import check_model, model_version
from mpsim.traces.atomic import write_parquet_atomic
from mpsim.traces.schema import DEFAULT_ENGINE

SERVE_FORMAT = 1  # bump when a change to the serving simulation makes old points stale
SCHED_KEYS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "chunked_prefill", "mixed_precision")
KEYS = ("rates", "requests", "duration_s", "arrivals", "prompt_len", "gen_len", "seed", "slo_ttft_ms",
        "slo_tpot_ms", "perf_model", *SCHED_KEYS)
POINTS, RESULTS = "serve_points", "serve_results.parquet"
DEFAULT_REQUESTS = 500
COLUMNS = (
    "key", "model", "policy", "engine", "tp", "pp", "hw", "hw_kind", "perf_model", "rate", "requests",
    "arrivals", "prompt_len", "gen_len", "seed", "slo_ttft_s", "slo_tpot_s", "throughput_rps",
    "output_tokens_per_s", "output_tokens_per_s_per_device", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s",
    "ttft_p99_s", "tpot_mean_s",
    "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s",
    "goodput_rps", "slo_attainment", "slo_met", "peak_concurrent_sequences", "mean_batch",
    "peak_kv_occupancy", "preemptions", "kv_blocks", "kv_bytes_per_token", "weights_bytes",
    "duration_s", "iterations", "wall_s",
)


@dataclass(frozen=True)
class ServeSection:
    rates: tuple[float, ...]
    settings: dict[str, Any]  # every other key, with defaults filled

    def config(self, engine: str = DEFAULT_ENGINE, tp: int = 1, pp: int = 1,
               quant_method: str | None = None) -> ServeConfig:
        s = self.settings
        sched = SchedulerConfig(**{k: s[k] for k in SCHED_KEYS if s.get(k) is not None})
        ms = 1e-3
        slo = Slo(None if s["slo_ttft_ms"] is None else s["slo_ttft_ms"] * ms,
                  None if s["slo_tpot_ms"] is None else s["slo_tpot_ms"] * ms)
        return ServeConfig(scheduler=sched, slo=slo, perf_model=s["perf_model"], engine=engine, tp=tp, pp=pp,
                           quant_method=quant_method)


@dataclass(frozen=True)
class ServePoint:
    key: str
    rate: float


@dataclass(frozen=True)
class ServeTask:
    """One (model, policy, engine, hardware) and its pending rates: run together, sharing one pricer."""

    model: ModelSpec
    policy: str
    hw_name: str
    hw: HardwareSpec
    section: ServeSection
    points: tuple[ServePoint, ...]
    out_dir: str
    engine: str = DEFAULT_ENGINE
    tp: int = 1
    pp: int = 1
    quant_method: str | None = None

    @property
    def size(self) -> int:
        return len(self.points)


def parse_section(source: str, value: Any) -> ServeSection:
    """Validate the `serve:` mapping whole; a bad key is one line naming it."""
    where = f"{source}: serve"
    if not isinstance(value, dict):
        raise MpsimInputError(f"{where}: expected a mapping with keys {', '.join(KEYS)}")
    for key in value:
        if key not in KEYS:
            raise MpsimInputError(f"{where}.{key}: unknown key; expected one of: {', '.join(KEYS)}")
    rates = value.get("rates")
    if not isinstance(rates, list) or not rates or not all(
            isinstance(r, int | float) and not isinstance(r, bool) and r > 0 for r in rates):
        raise MpsimInputError(f"{where}.rates: expected a non-empty list of rates > 0 (requests/s), "
                              f"got {rates!r}")
    if len(set(rates)) != len(rates):
        raise MpsimInputError(f"{where}.rates: a rate is listed more than once: {rates}")
    s = {"requests": None, "duration_s": None, "arrivals": "poisson", "prompt_len": 512, "gen_len": 256,
         "seed": 0, "slo_ttft_ms": None, "slo_tpot_ms": None, "perf_model": "sim",
         **{k: v for k, v in value.items() if k != "rates"}}
    if s["requests"] is not None and s["duration_s"] is not None:
        raise MpsimInputError(f"{where}: give requests or duration_s, not both")
    if s["requests"] is None and s["duration_s"] is None:
        s["requests"] = DEFAULT_REQUESTS
    for key, kind in (("requests", int), ("duration_s", float), ("seed", int)):
        v = s[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, kind | int) or v < 0):
            raise MpsimInputError(f"{where}.{key}: expected a number >= 0, got {v!r}")
    try:
        if arrival_kind(str(s["arrivals"]))[0] == "csv":
            raise MpsimInputError("a sweep draws its arrivals: poisson or gamma:CV")
        parse_lengths(s["prompt_len"], "prompt_len")
        parse_lengths(s["gen_len"], "gen_len")
        check_model(str(s["perf_model"]))
        ServeSection(tuple(float(r) for r in rates), s).config()
    except (MpsimInputError, TypeError) as exc:
        raise MpsimInputError(f"{where}: {exc}") from None
    return ServeSection(tuple(float(r) for r in rates), s)


def point_key(model: ModelSpec, policy: str, hw: HardwareSpec, section: ServeSection, rate: float,
              engine: str = DEFAULT_ENGINE, tp: int = 1, pp: int = 1,
              quant_method: str | None = None) -> str:
    ident = {"format": SERVE_FORMAT, "model": model.as_dict(), "policy": policy,
             "hw": dataclasses.asdict(hw),  # type: ignore[call-overload]
             "settings": section.settings, "rate": rate,
             "perf_model_version": model_version(section.settings["perf_model"])}
    if engine != DEFAULT_ENGINE:  # the default's keys stay those of specs before engines
        ident["engine"] = engine
    if (tp, pp) != (1, 1):  # one device's keys stay those of specs before parallel plans
        ident["parallel"] = [tp, pp]
    if quant_method is not None:  # no method: the keys of specs before methods
        ident["quant_method"] = quant_method
    text = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def tasks(spec: Any, done: set[str], out_dir: str) -> list[ServeTask]:
    """One task per (model, policy, engine, plan, hardware) of the spec with pending rates (grid order)."""
    section: ServeSection = spec.serve
    out = []
    for model, policy, engine, (tp, pp) in itertools.product(spec.models, spec.policies, spec.engines,
                                                             spec.plans):
        for name, hw in spec.hardware.items():
            if spec.excludes(model.name, policy, engine, name):
                continue
            method = spec.quant_method
            points = tuple(ServePoint(point_key(model, policy, hw, section, r, engine, tp, pp, method), r)
                           for r in section.rates)
            todo = tuple(p for p in points if p.key not in done)
            if todo:
                out.append(ServeTask(model, policy, name, hw, section, todo, out_dir, engine, tp, pp,
                                     method))
    return out


def keys(spec: Any) -> list[str]:
    section: ServeSection = spec.serve
    return [point_key(m, p, hw, section, r, e, tp, pp, spec.quant_method)
            for m, p, e, (tp, pp) in itertools.product(
                spec.models, spec.policies, spec.engines, spec.plans)
            for name, hw in spec.hardware.items() if not spec.excludes(m.name, p, e, name)
            for r in section.rates]


def run_serve_task(task: ServeTask) -> list[str]:
    """Run every pending rate of the task (one shared pricer) and save each point as it finishes."""
    from mpsim.policy import parse_policy
    from mpsim.serve.arrivals import build_requests
    from mpsim.serve.engine import make_pricer, run_serve

    policy, s = parse_policy(task.policy), task.section.settings
    cfg = task.section.config(task.engine, task.tp, task.pp, task.quant_method)
    pricer = make_pricer(task.model, policy, task.hw, cfg)
    store = PointStore(task.out_dir, POINTS)
    written = []
    for point in task.points:
        t0 = time.perf_counter()
        reqs = build_requests(task.model, arrivals=s["arrivals"], rate=point.rate, requests=s["requests"],
                              duration_s=s["duration_s"], prompt_len=s["prompt_len"],
                              gen_len=s["gen_len"], seed=s["seed"])
        result = run_serve(task.model, policy, task.hw, reqs, cfg, pricer=pricer)
        store.write_point(point.key, row(point, task, result.summary))
        plan = "" if (task.tp, task.pp) == (1, 1) else f" tp{task.tp} pp{task.pp}"
        store.log_computed(point.key, f"serve {task.model.name} {task.policy} {task.engine}{plan} "
                                      f"{task.hw_name} {point.rate:g}/s", time.perf_counter() - t0)
        written.append(point.key)
    return written


def row(point: ServePoint, task: ServeTask, s: dict[str, Any]) -> dict[str, Any]:
    cap = s["kv_capacity"]
    settings = task.section.settings
    values = {**s, "key": point.key, "model": task.model.name, "policy": task.policy,
              "engine": task.engine, "tp": task.tp, "pp": task.pp, "hw": task.hw_name,
              "hw_kind": task.hw.kind, "rate": point.rate, "arrivals": str(settings["arrivals"]),
              "prompt_len": str(settings["prompt_len"]), "gen_len": str(settings["gen_len"]),
              "seed": settings["seed"], "kv_blocks": cap["num_blocks"],
              "kv_bytes_per_token": cap["kv_bytes_per_token"], "weights_bytes": cap["weights_bytes"]}
    out = {c: values.get(c) for c in COLUMNS}
    out["slo_met"] = None if out["slo_met"] is None else bool(out["slo_met"])
    return out


def merge(root: str | Path, point_keys: list[str]) -> pd.DataFrame:
    """Write DIR/serve_results.parquet from the points of `point_keys` (in order) and return it."""
    store = PointStore(root, POINTS)
    table = store.read_points(point_keys)
    write_parquet_atomic(pa.Table.from_pandas(table, preserve_index=False), Path(root) / RESULTS)
    return table


def spec_copy(section: ServeSection) -> dict[str, Any]:
    return {"rates": list(section.rates), **{k: v for k, v in section.settings.items() if v is not None}}


GROUP = ["model", "hw", "policy", "tp", "pp"]


def max_rates(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, hardware, policy, plan): the highest swept rate whose p99s meet every SLO given (NaN
    where none does), the throughput there, and the p99 TPOT/TTFT at the lowest rate (how far off)."""
    rows = []
    table = table.assign(tp=table["tp"].fillna(1).astype(int), pp=table["pp"].fillna(1).astype(int)) \
        if "tp" in table else table.assign(tp=1, pp=1)  # tables from before parallel plans: one device
    for (model, hw, policy, tp, pp), g in table.groupby(GROUP, sort=False):
        g = g.sort_values("rate")
        met = g[g["slo_met"].fillna(False).astype(bool)]
        best = met.iloc[-1] if len(met) else None
        label = policy if (tp, pp) == (1, 1) else f"{policy} tp{tp}" + (f"xpp{pp}" if pp > 1 else "")
        rows.append({"model": model, "hw": hw, "policy": label, "tp": int(tp), "pp": int(pp),
                     "slo_ttft_s": g["slo_ttft_s"].iloc[0], "slo_tpot_s": g["slo_tpot_s"].iloc[0],
                     "max_rate_rps": float(best["rate"]) if best is not None else float("nan"),
                     "throughput_rps": float(best["throughput_rps"]) if best is not None else float("nan"),
                     "lowest_rate": float(g["rate"].iloc[0]),
                     "lowest_rate_tpot_p99_s": float(g["tpot_p99_s"].iloc[0]),
                     "lowest_rate_ttft_p99_s": float(g["ttft_p99_s"].iloc[0])})
    return pd.DataFrame(rows)


def slo_goal(row: Any) -> str:
    ms = 1e3
    goals = [f"p99 {k.upper()} <= {row[f'slo_{k}_s'] * ms:g} ms" for k in ("ttft", "tpot")
             if row.get(f"slo_{k}_s") is not None and row[f"slo_{k}_s"] == row[f"slo_{k}_s"]]
    return " and ".join(goals)


def slo_lines(table: pd.DataFrame) -> list[str]:
    """What the serve points say about the SLOs: the best policy per model and hardware, or that no
    policy meets them at any swept rate (said as such), each line naming the performance model that
    priced the iterations (the roofline and the simulator can rank policies differently)."""
    if table.empty or table[["slo_ttft_s", "slo_tpot_s"]].isna().all().all():
        return []
    rates = max_rates(table)
    lines = []
    for (model, hw), g in rates.groupby(["model", "hw"], sort=False):
        goal = slo_goal(g.iloc[0])
        priced = table[(table["model"] == model) & (table["hw"] == hw)]["perf_model"]
        where = f"{model} on {hw} (priced by {', '.join(map(str, dict.fromkeys(priced)))})"
        if g["max_rate_rps"].isna().all():
            w = g.iloc[0]
            tpot, ttft = w["lowest_rate_tpot_p99_s"] * 1e3, w["lowest_rate_ttft_p99_s"] * 1e3
            lines.append(f"{where}: no policy meets {goal} at any swept rate (at "
                         f"{w['lowest_rate']:g}/s {w['policy']} has p99 TPOT {tpot:.1f} ms, "
                         f"TTFT {ttft:.0f} ms)")
            continue
        parts = [f"{r.policy} {r.max_rate_rps:g}/s" if r.max_rate_rps == r.max_rate_rps else
                 f"{r.policy} none" for r in g.itertuples()]
        lines.append(f"{where}, max swept rate meeting {goal}: " + ", ".join(parts))
    return lines
