"""`mpsim capture --tp N` and `mpsim generate --tp N`: the engine run tensor-parallel on N ranks
(mpsim/engine/distributed.py), its launches merged into one trace.

Every rank of a tensor-parallel group runs the same launches at the same shapes (mpsim/parallel.py),
so the trace keeps rank 0's rows, each with `tp` = N, as `mpsim synth --tp N` writes them; the other
ranks' rows are checked to be the same launches at the same shapes (an error if not). Times are rank
0's (host wall time under the Triton interpreter: a collective's time includes waiting for the
slower rank); every rank's total is kept in the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mpsim.engine.capture import capture_prompts, environment
from mpsim.engine.distributed import DEFAULT_TIMEOUT_S, DistributedError, RankJob, RankResult, run_ranks
from mpsim.errors import MpsimInputError
from mpsim.models import ModelSpec
from mpsim.parallel import ParallelPlan
from mpsim.policy import Policy
from mpsim.synth import parallel_plan
from mpsim.traces.trace import Trace, TraceMeta
from mpsim.workload import Workload

# What every rank's row of one launch must agree on (the measured time and device may differ).
SAME_ON_EVERY_RANK = ("kernel", "op", "phase", "step", "layer", "module", "m", "n", "k", "w_format",
                      "w_bits", "group_size", "bias", "batch", "q_len", "kv_len", "num_q_heads",
                      "num_kv_heads", "head_dim", "k_bits", "v_bits", "grid", "config", "msg_bytes")


def tp_plan(spec: ModelSpec, policy: Policy, tp: int) -> ParallelPlan:
    """mpsim's own plan for `tp` ranks (one clear error when tp does not divide the heads or the FFN)."""
    plan = parallel_plan(spec, "mpsim", tp)
    if policy.family == "float":
        raise MpsimInputError(f"--tp {tp} with {policy.spelling}: mpsim's Triton kernels have no fp8/fp4 "
                              "GEMM; a tensor-parallel run takes fp16, group or any-precision weights")
    return plan


def capture_tp(spec: ModelSpec, policy: Policy, workload: Workload, tp: int, *,
               weights: str | Path | None = None, seed: int = 0,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[Trace, list[list[int]]]:
    """Generate on `tp` ranks with the Triton backend and record every launch and collective:
    the trace (rank 0's rows, `tp` set) and the generated tokens. `weights`: an HF folder, None for
    random weights from `seed` (--dummy), drawn as `capture` draws them."""
    from mpsim.kernels.runtime import on_gpu

    plan = tp_plan(spec, policy, tp)
    job = RankJob(spec, policy.spelling, capture_prompts(spec, workload, seed), workload.gen_len, tp,
                  None if weights is None else str(weights), seed,
                  allreduce_kernel=plan.allreduce_kernel(), timeout_s=timeout_s)
    results = run_ranks(job)
    rows = merged_rows(results, tp)
    tokens = same_tokens(results)
    gpu, wall = on_gpu(), results[0].wall_s
    env = environment("triton", gpu) | {
        "weights": str(weights or "dummy"), "decode": "eager", "protocol": "eager",
        "generation_wall_s": wall, "tokens_per_s": workload.batch * workload.gen_len / wall,
        "parallel": plan.describe() | {
            "comm_backend": "nccl" if gpu else "gloo", "ranks": tp,
            "rows_from": "rank 0 (every rank runs the same launches)",
            "rank_measured_ms": [round(sum(r["measured_us"] for r in res.rows) / 1e3, 3) for res in results]}}
    meta = TraceMeta("capture", spec.as_dict(), policy.spelling, workload.as_dict(), env, protocol="eager")
    return Trace.from_rows(rows, meta), tokens


def generate_tp(spec: ModelSpec, policy: Policy, prompts: list[list[int]], gen_len: int, tp: int, *,
                weights: str | Path, backend: str, eos: tuple[int, ...] = (),
                timeout_s: float = DEFAULT_TIMEOUT_S) -> list[list[int]]:
    """Greedy generation on `tp` ranks (nothing recorded): the new tokens of each prompt."""
    plan = tp_plan(spec, policy, tp)
    job = RankJob(spec, policy.spelling, prompts, gen_len, tp, str(weights), backend=backend,
                  record=False, eos=eos, allreduce_kernel=plan.allreduce_kernel(), timeout_s=timeout_s)
    return same_tokens(run_ranks(job))


def same_tokens(results: list[RankResult]) -> list[list[int]]:
    """The tokens every rank generated (they sample the same gathered logits: one answer)."""
    first = results[0].tokens
    for res in results[1:]:
        if res.tokens != first:
            raise DistributedError(f"rank {res.rank} generated {res.tokens}, rank 0 {first}: the ranks of "
                                   "a tensor-parallel group must agree on every token")
    return first


def merged_rows(results: list[RankResult], tp: int) -> list[dict[str, Any]]:
    """Rank 0's rows with `tp` set, after checking every rank ran the same launches."""
    base = results[0].rows
    for res in results[1:]:
        if len(res.rows) != len(base):
            raise DistributedError(f"rank {res.rank} recorded {len(res.rows)} launches, rank 0 {len(base)}")
        for i, (a, b) in enumerate(zip(base, res.rows, strict=True)):
            diff = [c for c in SAME_ON_EVERY_RANK if a.get(c) != b.get(c)]
            if diff:
                raise DistributedError(f"launch {i} ({a.get('kernel')}, {a.get('module')}): rank {res.rank} "
                                       f"differs from rank 0 in {diff}")
    return [{**r, "tp": tp} for r in base]
