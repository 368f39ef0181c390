"""Parallel plans: tensor parallelism (TP) within a node and pipeline parallelism (PP) across stages,
as the launch plan (mpsim/launch_plan.py) builds their rows (docs/parallelism.md).

Tensor parallelism is Megatron-LM's (Shoeybi et al. 2019, arXiv:1909.08053, section 3), as vLLM
runs it (vllm/model_executor/layers/linear.py: QKVParallelLinear, MergedColumnParallelLinear,
RowParallelLinear): QKV and gate/up column-parallel (each rank a 1/tp slice of the output
features), O and down row-parallel (a 1/tp slice of the input features) with an all-reduce of the
m x hidden output after each; query heads split 1/tp, KV heads split when kv_heads >= tp, else
each KV head replicated on tp/kv_heads ranks (vLLM's QKVParallelLinear: num_kv_head_replicas =
tp / num_kv_heads, which must divide). Norms, RoPE tables, residual adds and sampling are replicated:
every rank runs them on the full hidden width. The embedding is vocab-parallel (vLLM's
VocabParallelEmbedding: each rank looks up its vocab shard, masked, then an all-reduce of the
m x hidden result); the lm_head is vocab-parallel (ParallelLMHead: vocab padded to a multiple of
tp, each rank vocab/tp logits) followed by an all-gather of the batch x vocab logits before
sampling. Every rank of a group runs the same shapes (the bias of a row-parallel GEMM is added on
rank 0 only in vLLM; its rows keep the model's bias flag), so the trace stores one row per kernel
with the group size in `tp`.

Pipeline parallelism splits the layers into `pp` stages as vLLM's get_pp_indices does
(vllm/distributed/utils.py: num_layers // pp each, the remainder one more each on the stages before
the last); stage 0 also runs the embedding, the last stage the final norm, lm_head and sampling.
After the last layer of each stage but the last, a send/recv of the m x hidden activations to the
next stage (one tensor: mpsim's residual stream is one tensor after the residual add). A batch
may be split into micro-batches (mpsim/synth.py, `micro_batch` rows), which the simulator runs
through the stages concurrently (mpsim/sim/pipeline.py); one batch goes through the stages in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from mpsim.errors import MpsimInputError
from mpsim.library.collectives import ALLREDUCE_KERNELS, NCCL_KERNELS
from mpsim.models import ModelSpec


@dataclass(frozen=True)
class ParallelPlan:
    """`tp` ranks per tensor-parallel group, `pp` pipeline stages, the all-reduce's library
    (mpsim/library/collectives.py: the engine file's `allreduce` op)."""

    tp: int = 1
    pp: int = 1
    allreduce: str = "nccl"

    def __post_init__(self) -> None:
        for key in ("tp", "pp"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MpsimInputError(f"--{key} {value!r}: expected a whole number >= 1")
        if self.allreduce not in ALLREDUCE_KERNELS:
            raise MpsimInputError(f"all-reduce library {self.allreduce!r}: expected one of "
                                  f"{list(ALLREDUCE_KERNELS)}")

    @property
    def devices(self) -> int:
        return self.tp * self.pp

    @property
    def single(self) -> bool:
        return self.tp == 1 and self.pp == 1

    def allreduce_kernel(self) -> str:
        return ALLREDUCE_KERNELS[self.allreduce]

    def gather_kernel(self) -> str:
        return NCCL_KERNELS["allgather"]

    def describe(self) -> dict[str, object]:
        """The plan as trace metadata (environment["parallel"]) and reports show it."""
        return {"tp": self.tp, "pp": self.pp, "allreduce": self.allreduce,
                "embedding": "vocab-parallel + all-reduce" if self.tp > 1 else "replicated",
                "lm_head": "vocab-parallel + all-gather of the logits" if self.tp > 1 else "replicated"}


SINGLE = ParallelPlan()


def check_plan(spec: ModelSpec, plan: ParallelPlan) -> None:
    """One clear error for a plan the model cannot take: tp must divide the query heads and the FFN
    width, the KV heads divide by tp or tp by the KV heads (replication); pp at most the layers."""
    tp = plan.tp
    if spec.num_heads % tp:
        raise MpsimInputError(f"--tp {tp} does not divide the {spec.num_heads} query heads of "
                              f"{spec.name}; expected a divisor of {spec.num_heads}")
    kv = spec.num_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise MpsimInputError(f"--tp {tp} and the {kv} KV heads of {spec.name}: expected tp to divide "
                              f"the KV heads or the KV heads to divide tp (each then replicated)")
    if spec.ffn % tp:
        raise MpsimInputError(f"--tp {tp} does not divide the FFN width {spec.ffn} of {spec.name}")
    if plan.pp > spec.num_layers:
        raise MpsimInputError(f"--pp {plan.pp}: {spec.name} has only {spec.num_layers} layers")


@cache
def rank_spec(spec: ModelSpec, tp: int) -> ModelSpec:
    """The shapes one rank of a tensor-parallel group runs: heads, KV heads (at least one: a
    replicated head) and FFN width over tp; hidden, head_dim and vocab as the model's (the lm_head's
    vocab shard is `vocab_shard`)."""
    if tp == 1:
        return spec
    return replace(spec, num_heads=spec.num_heads // tp, num_kv_heads=max(1, spec.num_kv_heads // tp),
                   ffn=spec.ffn // tp)


def kv_heads_per_rank(spec: ModelSpec, tp: int) -> int:
    return max(1, spec.num_kv_heads // tp)


def vocab_shard(vocab: int, tp: int) -> int:
    """Logits per rank of a vocab-parallel lm_head: the vocab padded to a multiple of tp, over tp."""
    return -(-vocab // tp)


def stage_layers(num_layers: int, pp: int) -> list[int]:
    """Layers per stage, as vLLM's get_pp_indices splits them (remainder on the stages before the last)."""
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    return counts


def stage_of_layers(num_layers: int, pp: int) -> list[int]:
    """The stage of each layer, in order."""
    return [s for s, count in enumerate(stage_layers(num_layers, pp)) for _ in range(count)]
