"""Repeating an engine-benchmarks row in mpsim: synthesize the run as the engine's kernels on the
row's GPU, simulate it, and count it the way the row counts.

A run is one static batch: `batch` prompts of `prompt_len` tokens prefilled together, then
`gen_len - 1` decode passes (synthesis; mpsim/synth.py). The engines replay decode as CUDA graphs,
so launches are priced under the `graph` protocol (mpsim/sim/protocols.yaml: the inter-kernel gap of
a graph replay), the simulator's default. The count:
- whole-run: generated tokens of all sequences / the run's time (RunSummary.tokens_per_s);
- decode-rate: decode tokens / the decode passes' time (RunSummary.decode_tokens_per_s);
- decode-log: decode tokens / time over the last window an engine's decode log line reports
  (`log_window`: SGLang logs "gen throughput" every decode_log_interval passes, counting the
  warm-up's passes too; E5 reports the last such line);
- latency: the run's time (RunSummary.total_s), what each request of the batch waits.
A row without batches (E8: the engine's max-throughput batch) runs the largest batch whose weights,
KV cache and peak activations fit mpsim/memory.py's share of the GPU (MEMORY_UTILIZATION).
A precision on `tp` GPUs is synthesized and simulated under that tensor-parallel plan (synth --tp:
one rank's launches and the engine file's all-reduce, priced over the GPU's node); whole-run-per-gpu
divides the run's tokens/s by `tp`. A `served` row (E7) is `mpsim serve`: its batch is the number of
prompts, all arriving at 0 s, scheduled with the row's (max_num_seqs, max_num_batched_tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpsim.analysis.validation.engine_rows import Count, Precision, RowSetup
from mpsim.engines import EngineChoice, architecture, get_engine
from mpsim.errors import MpsimInputError
from mpsim.hw_models.loader import load_hardware
from mpsim.hw_models.schema import GpuSpec
from mpsim.memory import MEMORY_UTILIZATION, per_gpu_bytes, point_memory
from mpsim.models import PRESETS, ModelSpec
from mpsim.policy import Policy, parse_policy
from mpsim.sim.memo import LaunchMemo
from mpsim.sim.summary import RunSummary
from mpsim.workload import Workload, check_context

MAX_BATCH = 4096  # the memory-budget batch search stops here (no row comes near it)


@dataclass(frozen=True)
class Run:
    """One run to repeat: a row's precision at one batch."""

    setup: RowSetup
    precision: Precision
    batch: int
    published: float | None

    @property
    def workload(self) -> Workload:
        return Workload(self.setup.prompt_len, self.setup.gen_len, self.batch)


def gpu(setup: RowSetup) -> GpuSpec:
    hw = load_hardware(setup.hw)
    if not isinstance(hw, GpuSpec):
        raise MpsimInputError(f"engine row {setup.row}: hardware {setup.hw!r} is not a GPU")
    return hw


def model(setup: RowSetup) -> ModelSpec:
    if setup.spec is not None:
        return setup.spec
    if setup.model not in PRESETS:
        raise MpsimInputError(f"engine row {setup.row}: no model preset {setup.model!r}")
    return PRESETS[setup.model]


def runs(setup: RowSetup) -> list[Run]:
    """Every (precision, batch) of a row; memory-budget rows get each precision's own batch."""
    out = []
    for p in setup.precisions:
        batches = setup.batches_of(p) or (memory_batch(model(setup), parse_policy(p.policy), setup,
                                                       gpu(setup)),)
        for i, b in enumerate(batches):
            out.append(Run(setup, p, b, None if p.published is None else p.published[i]))
    return out


def memory_batch(spec: ModelSpec, policy: Policy, setup: RowSetup, hw: GpuSpec) -> int:
    """The largest batch of the row's workload that fits MEMORY_UTILIZATION of one GPU."""
    budget = MEMORY_UTILIZATION * hw.dram.size_GB * 1e9

    def fits(b: int) -> bool:
        wl = Workload(setup.prompt_len, setup.gen_len, b)
        return per_gpu_bytes(spec, point_memory(spec, policy, wl), 1) <= budget

    if not fits(1):
        raise MpsimInputError(f"engine row {setup.row}: {spec.name} {policy} does not fit one {hw.name}")
    lo, hi = 1, MAX_BATCH
    while lo < hi:  # largest b with fits(b): the bytes grow with b
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def counted(count: Count, s: RunSummary, tp: int = 1) -> float:
    """The row's figure from a simulated run on `tp` GPUs."""
    if count == "whole-run":
        return s.tokens_per_s
    if count == "whole-run-per-gpu":
        return s.tokens_per_s / tp
    if count == "decode-rate":
        return s.decode_tokens_per_s
    return s.total_s


def predict(run: Run, memo: LaunchMemo) -> float:
    """The run's figure as the row counts it, simulated with the engine's kernels on its GPU."""
    from mpsim.sim import simulate
    from mpsim.sim.best_config import with_autotuned_configs
    from mpsim.synth import synthesize

    spec, hw = model(run.setup), gpu(run.setup)
    check_context(spec, run.setup.prompt_len, run.setup.gen_len)
    if run.setup.count == "served":
        return served(run, spec, hw)
    tp = run.precision.tp
    trace = synthesize(spec, parse_policy(run.precision.policy), run.workload,
                       engine=EngineChoice.on(run.setup.engine, hw, run.precision.method), tp=tp)
    # a library that autotunes at run time (GemLite, on by default) runs its fastest candidate
    trace, _ = with_autotuned_configs(trace, hw)
    result = simulate(trace, hw, memo=memo)
    if run.setup.count == "decode-log":
        return logged_rate(run, trace.rows["phase"], trace.rows["step"], result.time_s.to_numpy())
    return counted(run.setup.count, result.summary, tp)


def log_window(gen_len: int, interval: int, warm: int) -> tuple[int, int]:
    """The decode passes (first, last; 1-based, the first token coming from the prefill) of the
    last log line: the engine counts decode passes from its start, the warm-up's `warm` included,
    and logs the rate of the `interval` passes since its last line whenever the count is a
    multiple of `interval`."""
    last = gen_len - 1
    while last >= interval and (warm + last) % interval:
        last -= 1
    if last < interval:
        raise MpsimInputError(f"a run of {gen_len} new tokens logs no full window of {interval} "
                              f"decode passes (warm-up {warm})")
    return last - interval + 1, last


def logged_rate(run: Run, phase: pd.Series, step: pd.Series, time_s: np.ndarray) -> float:
    """Decode tokens / s over the last logged window (`log_window`) of a simulated run."""
    if run.setup.log is None:
        raise MpsimInputError(f"engine row {run.setup.row}: a decode-log count needs the engine's "
                              "(log interval, warm-up decode passes)")
    first, last = log_window(run.setup.gen_len, *run.setup.log)
    steps = step.to_numpy()
    window = (phase.to_numpy() == "decode") & (steps >= first) & (steps <= last)
    return run.batch * (last - first + 1) / float(time_s[window].sum())


def served(run: Run, spec: ModelSpec, hw: GpuSpec) -> float:
    """Output tokens / s of `mpsim serve` over the whole run: `run.batch` prompts at 0 s."""
    import numpy as np

    from mpsim.serve.arrivals import NO_SWITCH, Requests
    from mpsim.serve.config import SchedulerConfig, ServeConfig
    from mpsim.serve.engine import run_serve

    s = run.setup
    if s.scheduler is None:
        raise MpsimInputError(f"engine row {s.row}: a served row needs (max_num_seqs, "
                              "max_num_batched_tokens)")
    n = run.batch
    reqs = Requests(np.zeros(n), np.full(n, s.prompt_len, dtype=np.int64),
                    np.full(n, s.gen_len, dtype=np.int64), np.full(n, NO_SWITCH, dtype=np.int64),
                    f"engine row {s.row}: {n} prompts at 0 s")
    # chunked prefill on: the scheduler of vLLM's V1 engine (SchedulerConfig's default)
    sched = SchedulerConfig(max_num_seqs=s.scheduler[0], max_num_batched_tokens=s.scheduler[1])
    cfg = ServeConfig(scheduler=sched, engine=s.engine, tp=run.precision.tp)
    summary = run_serve(spec, parse_policy(run.precision.policy), hw, reqs, cfg).summary
    return float(summary["output_tokens_per_s"])


def stand_ins(setup: RowSetup) -> list[str]:
    """The GEMM and attention kernels of the row's engine on its GPU that stand in for kernels not
    modelled yet: "kernel for what it stands in for"."""
    engine, arch = get_engine(setup.engine), architecture(gpu(setup))
    formats = {parse_policy(p.policy).weights_at("decode", 1).w_format for p in setup.precisions}
    wanted = [("gemm", f) for f in sorted(formats)] + [("decode_attention", "kv16"),
                                                       ("prefill_attention", "any")]
    out: list[str] = []
    for op, fmt in wanted:
        for c in engine.choices(op, fmt):
            text = f"{c.kernel} for {c.stands_in_for}"
            if arch in c.arch and c.stands_in_for and text not in out:
                out.append(text)
    return out
