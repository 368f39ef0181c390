"""An iteration's launches, built by mpsim.launch_plan (the one place rows are built from shapes).

An iteration runs the linear layers and row-wise ops over all its T tokens (one GEMM launch per
precision group, M = the group's tokens), one decode attention launch over its decoding sequences
(kv_len = the longest, kv_tokens = their sum), one causal prefill attention launch per distinct
chunk shape, and the final norm, lm_head and sampling over its S sequences. `iteration_rows` lays
that out in the engine's order (launch_plan.layer_rows, with the attention and GEMM rows
substituted); pricing uses the same rows cut into components (pricing.py), each component priced
in the L2-residency context it has in a pass of its own size: a `stand_in` launch (a residual add
writing exactly the bytes the real predecessor writes) precedes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from mpsim.engines.rows import Target, engine_rows
from mpsim.launch_plan import (
    ROW_PARALLEL,
    PassShape,
    Row,
    costed,
    kv_write_row,
    layer_rows,
    pass_attention_row,
    pass_gemm_row,
    pass_rows,
    rowwise_row,
)
from mpsim.library import mpsim_fp as own_fp
from mpsim.library.collectives import NCCL_KERNELS, collective_row
from mpsim.models import ModelSpec
from mpsim.parallel import SINGLE, ParallelPlan, rank_spec, stage_of_layers
from mpsim.policy import FP16_WEIGHTS, WeightChoice
from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import COLUMNS

STAND_IN = "stand_in"  # the module of a residency stand-in launch


@dataclass(frozen=True)
class Shape:
    """What one iteration computes, in the terms its launches need."""

    groups: tuple[tuple[WeightChoice, int], ...]  # linear-layer tokens per weight choice
    tokens: int                                   # T
    seqs: int                                     # S: sequences (each samples its last position)
    has_prefill: bool
    decode: tuple[int, int, int] | None           # (sequences, longest KV, KV tokens) after the step
    prefill: tuple[tuple[int, int, int], ...]     # (count, chunk tokens, cached before), by shape


def base_pass(tokens: int, kv_bits: int, kv_block: int, phase: str = "decode",
              weights: WeightChoice = FP16_WEIGHTS, kv_format: str | None = None) -> PassShape:
    """A pass of `tokens` one-token sequences: the row-wise launches of `tokens` tokens (`kv_format`:
    the cache's, traces/schema.py KV_FORMATS; None: the int format of kv_bits). Its rows are mpsim's
    own, rebuilt as the engine's kernels when framed (`as_target`): an fp8 / fp4 GEMM is its shape
    until then (mpsim's own kernels: mpsim/library/mpsim_fp.py as_own)."""
    return PassShape(phase, 0 if phase == "prefill" else 1, tokens, 1, 1, weights, kv_bits, kv_block,
                     kv_format=kv_format, rebuilt=True)


def stand_in(pred: Row, layer: int = -1) -> Row:
    """A residual add that writes exactly what `pred` writes (so the next launch sees the same L2
    residency as after `pred`), to lead a component whose first launch follows `pred`."""
    n = max(1, launch_cost(pred).bytes_written // 2)
    return rowwise_row(base_pass(1, 16, 16), "other", "residual_add_kernel", STAND_IN, layer, 1, n)


def decode_attention_row(spec: ModelSpec, n: int, kv_max: int, kv_tokens: int, kv_bits: int,
                         kv_block: int, layer: int = 0, kv_format: str | None = None) -> tuple[Row, Row]:
    """(KV write, decode attention) of n sequences: longest KV kv_max, kv_tokens over the batch."""
    p = PassShape("decode", 1, n, 1, kv_max, FP16_WEIGHTS, kv_bits, kv_block, kv_format=kv_format,
                  rebuilt=True)
    attn = pass_attention_row(spec, p, layer)
    attn["kv_tokens"] = kv_tokens
    return kv_write_row(spec, p, layer), attn


def prefill_attention_row(spec: ModelSpec, count: int, chunk: int, before: int, kv_bits: int,
                          kv_block: int, layer: int = 0, kv_format: str | None = None) -> tuple[Row, Row]:
    """(KV write, causal attention) of `count` chunks of `chunk` tokens after `before` cached ones."""
    p = PassShape("prefill", 0, count, chunk, before + chunk, FP16_WEIGHTS, kv_bits, kv_block,
                  kv_format=kv_format, rebuilt=True)
    return kv_write_row(spec, p, layer), pass_attention_row(spec, p, layer)


def _attention_rows(spec: ModelSpec, s: Shape, kv_bits: int, kv_block: int, layer: int,
                    kv_format: str | None) -> list[Row]:
    rows = [prefill_attention_row(spec, c, q, b, kv_bits, kv_block, layer, kv_format)[1]
            for c, q, b in s.prefill]
    if s.decode is not None:
        rows.append(decode_attention_row(spec, *s.decode, kv_bits, kv_block, layer, kv_format)[1])
    return rows


def iteration_rows(spec: ModelSpec, s: Shape, kv_bits: int, kv_block: int,
                   plan: ParallelPlan = SINGLE, kv_format: str | None = None) -> list[Row]:
    """Every launch of the iteration, in order (the reference the components are measured against);
    under a parallel plan one rank's launches and the plan's collectives (`comm_rows`)."""
    full, spec = spec, rank_spec(spec, plan.tp)
    base = base_pass(s.tokens, kv_bits, kv_block, "prefill" if s.has_prefill else "decode",
                     kv_format=kv_format)
    rows: list[Row] = [pass_rows(replace(spec, num_layers=1), base)[0]]  # the embedding of T tokens
    rows += comm_rows(full, plan, s.tokens, "embed_allreduce", -1)
    stages = stage_of_layers(spec.num_layers, plan.pp)
    for layer in range(spec.num_layers):
        for row in layer_rows(spec, base, layer):
            if row["op"] == "attention":
                rows += _attention_rows(spec, s, kv_bits, kv_block, layer, kv_format)
            elif row["op"] == "gemm":
                k_n = (row["n"], row["k"], bool(row.get("bias")))
                rows += [pass_gemm_row(base, row["module"], layer, m, k_n[0], k_n[1], w, k_n[2])
                         for w, m in s.groups]
            else:
                rows.append(row)
            if row["module"] in ROW_PARALLEL:
                rows += comm_rows(full, plan, s.tokens, f"{row['module']}_allreduce", layer)
        if layer + 1 < spec.num_layers and stages[layer + 1] != stages[layer]:
            rows += comm_rows(full, plan, s.tokens, "stage_send", layer)
    rows += tail_rows(full, s.seqs, s.has_prefill, kv_bits, kv_block, plan, kv_format)
    for row in rows:  # one (phase, step): the iteration is one step of a step-level model
        row.update(phase=base.phase, step=base.step)
    return rows


def comm_rows(spec: ModelSpec, plan: ParallelPlan, tokens: int, module: str, layer: int) -> list[Row]:
    """The collective after a row-parallel GEMM (or the embedding) on the TP group, or the send of
    `module` "stage_send" to the next stage, over `tokens` x hidden; nothing on one device."""
    if module == "stage_send":
        return [collective_row("sendrecv", NCCL_KERNELS["sendrecv"], tokens, spec.hidden, plan.tp,
                               module, layer, 0)] if plan.pp > 1 else []
    if plan.tp == 1:
        return []
    return [collective_row("allreduce", plan.allreduce_kernel(), tokens, spec.hidden, plan.tp,
                           module, layer, 0)]


def tail_rows(spec: ModelSpec, seqs: int, has_prefill: bool, kv_bits: int, kv_block: int,
              plan: ParallelPlan = SINGLE, kv_format: str | None = None) -> list[Row]:
    """The launches after the last layer: [last-token gather,] final norm, lm_head (a vocab shard and
    the logits' all-gather under tensor parallelism), sampling."""
    p = replace(base_pass(seqs, kv_bits, kv_block, "prefill" if has_prefill else "decode",
                          kv_format=kv_format), plan=plan)
    rows = pass_rows(replace(spec, num_layers=1), p)
    return [r for r in rows if r["layer"] == -1 and r["module"] not in ("embed", "embed_allreduce")]


def as_target(rows: list[Row], target: Target | None) -> list[tuple[int, Row]]:
    """The launches the target engine makes for `rows`, each with the index of the row it comes
    from: none for an op the engine fuses into its attention kernel (RoPE, KV append), the rebuilt
    row, or an activation-quantization launch and then the GEMM where the engine quantizes a W8A8 /
    A4 GEMM's input (mpsim/engines/rows.py engine_rows). The residency stand-ins stay mpsim's own
    add (weight 0: only the bytes they leave in L2 matter). `target` None: mpsim's own launches
    (an fp8 / fp4 GEMM's shape and an fp8 cache's rows as its fp8 / fp4 kernels: mpsim_fp.as_own)."""
    if target is None:
        return [(i, b) for i, r in enumerate(rows) for b in own_fp.as_own(r)]
    return [(i, b) for i, r in enumerate(rows)
            for b in ([r] if r.get("module") == STAND_IN else engine_rows(r, target))]


def frame(rows: list[Row], target: Target | None = None, *, launched: bool = False) -> pd.DataFrame:
    """The trace-row table of launch-plan rows (costed here, once), in order, ready for `simulate`
    (built column by column in the schema's dtypes: a frame-wide astype costs more than pricing).
    `target`: the rows as that engine launches them (`as_target`); `launched`: the rows are launches
    already (a part through pricing.py's _launched), framed as they are."""
    rows = rows if launched else [r for _, r in as_target(rows, target)]
    costed_rows = [costed(dict(r)) for r in rows]
    fill = {"launch_id": range(len(rows)), "stream": [0] * len(rows),
            "tp": [r.get("tp") or 1 for r in costed_rows],
            "stage": [r.get("stage") or 0 for r in costed_rows],
            "micro_batch": [r.get("micro_batch") or 0 for r in costed_rows],
            "phase": [r.get("phase") or "decode" for r in costed_rows],
            "step": [r.get("step") or 0 for r in costed_rows]}
    return pd.DataFrame({c: pd.array(list(fill[c]) if c in fill else [r.get(c) for r in costed_rows],
                                     dtype=dtype) for c, dtype in COLUMNS.items()})
