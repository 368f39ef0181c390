"""The request-level discrete-event simulation (SimPy): arrivals, and an engine stepping iterations.

Two processes share one simpy.Environment: the arrival process puts each request in the scheduler's
queue at its arrival time (and wakes an idle engine); the engine process asks the scheduler for the
next iteration, prices it (pricing.py), holds for that long, and applies it: tokens appear at the
end of the iteration that computes them (the first one when a request's prefill completes, TTFT =
that time - arrival), and a request finishes with its last token. With nothing to run the engine
waits for the next arrival. Everything is deterministic: the seed decides the requests, and SimPy
orders simultaneous events by the order they were scheduled.

Under pipeline parallelism (`--pp N`) the engine keeps N batches in flight, as vLLM's virtual
engines do (vllm/engine/llm_engine.py, V0: one Scheduler per pipeline stage count; a new request
goes to the scheduler with the fewest unfinished requests; vllm/core/scheduler.py gives each
num_gpu_blocks // pipeline_parallel_size KV blocks): N engine processes, each with its own scheduler
and its share of the KV blocks, and one SimPy resource per stage. An iteration is priced as before
(the sum of its stages, the pricer's) and passes through the stages in turn, each stage taking the
share of its layers (mpsim/parallel.py stage_layers: the embedding, the lm_head and the sends
counted in proportion, an assumption); a stage serves the next batch, of any virtual engine, as soon
as it is free. The iteration table's rows are each virtual engine's (its running, waiting and KV
blocks over its share); `time_s` is the iteration's price, not the wait for a busy stage.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import simpy

from mpsim.engines import EngineChoice, engine_target, model_heads
from mpsim.hw_models.schema import HardwareSpec
from mpsim.models import ModelSpec
from mpsim.parallel import ParallelPlan, rank_spec, stage_layers
from mpsim.policy import Policy
from mpsim.progress import progress_bar
from mpsim.serve.arrivals import Requests
from mpsim.serve.config import ServeConfig
from mpsim.serve.context import context_length
from mpsim.serve.kv import KvCapacity, kv_capacity
from mpsim.serve.outputs import IterationLog, request_table, summarize
from mpsim.serve.precision import PrecisionPlan
from mpsim.serve.pricing import IterationPricer
from mpsim.serve.scheduler import Scheduler, Step, merged
from mpsim.synth import parallel_plan


@dataclass
class ServeResult:
    requests: pd.DataFrame     # one row per request
    iterations: pd.DataFrame   # one row per iteration
    summary: dict[str, Any]
    capacity: KvCapacity


def make_pricer(spec: ModelSpec, policy: Policy, hw: HardwareSpec, cfg: ServeConfig) -> IterationPricer:
    """A pricer for (model, policy, hardware, config); pass it to several runs to share its memo."""
    choice = EngineChoice.on(cfg.engine, hw, cfg.quant_method)
    plan = serve_plan(spec, cfg)
    target = engine_target(choice.name, policy, model_heads(rank_spec(spec, plan.tp).as_dict()),
                           arch=choice.arch, sms=choice.sms, method=cfg.quant_method)
    # fp8 / fp4 weights: the GEMM rows are shapes until the parts are framed (rows.py as_target): an
    # engine's kernels with their activation-quantization launches, or mpsim's own (target None)
    return IterationPricer(spec, policy.kv_bits, hw, cfg.perf_model, cfg.buckets, cfg.protocol,
                           cfg.scheduler.block_size, whole_iterations(cfg.pricing, hw), target, plan,
                           policy.kv_format)


def serve_plan(spec: ModelSpec, cfg: ServeConfig) -> ParallelPlan:
    """The run's parallel plan (--tp, --pp): one clear error when the model cannot take it."""
    return parallel_plan(spec, cfg.engine, cfg.tp, cfg.pp)


def whole_iterations(pricing: str, hw: HardwareSpec) -> bool:
    """`iterations`: each iteration's launch list as one `simulate` call (one step of a step-level
    model). `auto`: so on an NPU, whose performance model simulates whole steps (the NPU step model,
    mpsim/sim/npu/step.py, where operators overlap across launches and components would not add
    up); components everywhere else."""
    if pricing != "auto":
        return pricing == "iterations"
    return hw.kind == "npu"


class _Wake:
    """The engine's alarm: armed when it goes idle, rung by the next arrival."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.event: simpy.Event | None = None

    def wait(self) -> simpy.Event:
        self.event = self.env.event()
        return self.event

    def ring(self) -> None:
        if self.event is not None and not self.event.triggered:
            self.event.succeed()


def run_serve(spec: ModelSpec, policy: Policy, hw: HardwareSpec, reqs: Requests, cfg: ServeConfig,
              pricer: IterationPricer | None = None, run_info: dict[str, Any] | None = None,
              audit_every: int = 0, progress: bool | None = False) -> ServeResult:
    """Serve `reqs` on `hw` under `policy`; per-request and per-iteration tables and a summary.

    `progress`: a bar of finished requests on stderr (None: when stderr is a terminal or
    MPSIM_PROGRESS=1; mpsim/progress.py).
    `pricer`: share one across runs of the same (model, policy, hardware, config) to reuse prices.
    `audit_every` K > 0: every K-th iteration is also priced as its exact launch list (one
    `simulate` call over every launch, no buckets) and the summary reports the error.
    """
    wall = time.perf_counter()
    budget = cfg.scheduler.budget(context_length(spec))
    cap = kv_capacity(spec, policy, hw, cfg.scheduler, budget, serve_plan(spec, cfg))
    plan = PrecisionPlan(policy, reqs.switch_step, cfg.scheduler.mixed_precision)
    pricer = pricer or make_pricer(spec, policy, hw, cfg)
    n = cfg.pp  # virtual engines: one batch in flight per pipeline stage
    share = cap if n == 1 else replace(cap, num_blocks=cap.num_blocks // n,
                                       watermark_blocks=cap.watermark_blocks // n)
    scheds = [Scheduler(reqs, cfg.scheduler, share, budget) for _ in range(n)]
    log = IterationLog(pricer.protocols)
    env = simpy.Environment()
    wakes = [_Wake(env) for _ in scheds]
    env.process(_arrivals(env, scheds, reqs.arrival_s, wakes))
    audit = Audit(audit_every)
    pipe = _Pipeline(env, spec.num_layers, n, scheds)
    with progress_bar(len(reqs), f"serve {spec.name} {policy.spelling}", "request", progress) as bar:
        for sched, wake in zip(scheds, wakes, strict=True):
            env.process(_engine(env, sched, pricer, plan, log, wake, len(reqs), audit, bar, pipe))
        env.run()
    sched = merged(scheds)
    if sched.finished < len(reqs):  # a scheduler bug, not a user error: say so loudly
        raise RuntimeError(f"serve: the scheduler stalled with {len(reqs) - sched.finished} requests "
                           f"unfinished ({sum(len(s.running) for s in scheds)} running, "
                           f"{sum(len(s.waiting) for s in scheds)} waiting)")
    requests = request_table(reqs, sched)
    iterations = log.table(share.num_blocks)
    info = {"model": spec.name, "policy": policy.spelling, "hw": hw.name,
            "perf_model": cfg.perf_model, "budget_tokens": budget, "tp": cfg.tp, "pp": cfg.pp,
            "engine": cfg.engine, "quant_method": cfg.quant_method,
            **(run_info or {})}
    pricing = {**pricer.stats.as_dict(), "audit": audit.report()}
    summary = summarize(requests, iterations, cfg, reqs, cap, pricing, info, time.perf_counter() - wall)
    return ServeResult(requests, iterations, summary, cap)


def _arrivals(env: simpy.Environment, scheds: list[Scheduler], times: np.ndarray,
              wakes: list[_Wake]) -> Generator[simpy.Event, Any, None]:
    """Each request, at its arrival, to the scheduler with the fewest unfinished requests (the first
    of equals: vLLM's _add_processed_request); one scheduler without pipeline parallelism."""
    for rid, t in enumerate(times.tolist()):
        if t > env.now:
            yield env.timeout(t - env.now)
        v = min(range(len(scheds)), key=lambda i: scheds[i].in_system)
        scheds[v].arrive(rid)
        wakes[v].ring()


class _Pipeline:
    """The stages an iteration passes through (one SimPy resource each, none on one stage), each
    taking its layers' share of the iteration's price, and the virtual engines' schedulers."""

    def __init__(self, env: simpy.Environment, layers: int, pp: int, scheds: list[Scheduler]) -> None:
        self.stages = [simpy.Resource(env, capacity=1) for _ in range(pp)] if pp > 1 else []
        self.shares = [c / layers for c in stage_layers(layers, pp)]
        self.scheds = scheds

    @property
    def finished(self) -> int:
        return sum(s.finished for s in self.scheds)

    def run(self, env: simpy.Environment, seconds: float) -> Generator[simpy.Event, Any, None]:
        if not self.stages:
            yield env.timeout(seconds)
            return
        for stage, share in zip(self.stages, self.shares, strict=True):
            with stage.request() as turn:
                yield turn
                yield env.timeout(seconds * share)


class Audit:
    """Every K-th iteration priced both ways: components with buckets, and its exact launch list."""

    def __init__(self, every: int) -> None:
        self.every, self.count = every, 0
        self.pairs: list[tuple[float, float]] = []

    def check(self, pricer: IterationPricer, step: Step, sched: Scheduler, plan: PrecisionPlan,
              seconds: float) -> None:
        self.count += 1
        if self.every > 0 and self.count % self.every == 0:
            self.pairs.append((seconds, pricer.reference(pricer.shape(step, sched, plan))))

    def report(self) -> dict[str, float] | None:
        if not self.pairs:
            return None
        got, ref = (np.array(x) for x in zip(*self.pairs, strict=True))
        rel = got / ref - 1
        return {"iterations": len(rel), "mean_abs_rel": float(np.abs(rel).mean()),
                "max_abs_rel": float(np.abs(rel).max()), "mean_rel": float(rel.mean()),
                "total_rel": float(got.sum() / ref.sum() - 1)}


def _engine(env: simpy.Environment, sched: Scheduler, pricer: IterationPricer, plan: PrecisionPlan,
            log: IterationLog, wake: _Wake, total: int, audit: Audit,
            bar: Any, pipe: _Pipeline) -> Generator[simpy.Event, Any, None]:
    while pipe.finished < total:
        step = sched.plan(env.now)
        if step is None:
            yield wake.wait()
            continue
        seconds, launches = pricer.price(step, sched, plan)
        audit.check(pricer, step, sched, plan, seconds)
        log.add(env.now, seconds, step, sched, launches)
        yield from pipe.run(env, seconds)
        done = sched.finished
        sched.complete(step, env.now)
        bar.update(sched.finished - done)
