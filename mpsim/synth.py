"""Trace synthesis: the launch list of a whole generation from model spec + policy + workload.

One prefill pass over the prompt (it yields the first new token), then gen_len - 1 decode passes.
Decode passes that share a weight format differ only in their attention rows (the KV length grows),
so each such segment's pass is built once by the launch plan (mpsim/launch_plan.py, the one place
launch rows are built) and repeated column by column; only the attention columns (kv_len, grid,
config, FLOPs, bytes) are computed per step, once per step for all layers. No per-row Python
objects: each column is allocated once in its storage width (traces/schema.py STORAGE) and filled
by broadcast writes, pass by pass; a 2.4M-launch trace is a few dozen numpy arrays
(traces/columns.py), written as they are (`mpsim synth`: traces/write.py, without pandas) or wrapped,
without a copy, into one DataFrame (`synthesize`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mpsim.engines import MPSIM_KERNELS, EngineChoice, engine_target, get_engine, model_heads
from mpsim.engines.rows import allreduce_library
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import ATTENTION_STEP_COLUMNS, PassShape, Row, decode_attention_costs, pass_launches
from mpsim.models import ModelSpec
from mpsim.parallel import SINGLE, ParallelPlan, check_plan, rank_spec
from mpsim.policy import Policy, WeightChoice
from mpsim.traces.columns import Numbers, Text, TraceColumns, numpy_dtype, to_frame
from mpsim.traces.meta import TraceMeta
from mpsim.traces.schema import COLUMNS, STORAGE
from mpsim.workload import Workload, check_size

if TYPE_CHECKING:
    from mpsim.traces.trace import Trace

TEXT = tuple(c for c, t in COLUMNS.items() if t == "string")


def synthesize(spec: ModelSpec, policy: Policy, workload: Workload, *, on_gpu: bool = True,
               kv_block: int | None = None, cuda_graphs: bool = False,
               engine: EngineChoice = MPSIM_KERNELS, tp: int = 1, pp: int = 1,
               micro_batches: int = 1) -> Trace:
    """The trace a generation would record, with analytic bytes/FLOPs and no measured times.
    `cuda_graphs`: decode attention configured as under CUDA-graph replay (mpsim/engine/graphs.py).
    `engine`: whose kernels the rows are (default mpsim's own, what capture runs). `tp`, `pp`: the
    parallel plan (mpsim/parallel.py): one rank's launches per TP group, stages, collectives.
    `micro_batches`: the batch split into that many micro-batches of batch/M sequences, each pass
    launched micro-batch after micro-batch (its own rows and send/recvs, column `micro_batch`)."""
    from mpsim.traces.trace import Trace  # pandas: the rows as a DataFrame

    columns, meta = synthesize_columns(spec, policy, workload, on_gpu=on_gpu, kv_block=kv_block,
                                       cuda_graphs=cuda_graphs, engine=engine, tp=tp, pp=pp,
                                       micro_batches=micro_batches)
    return Trace(to_frame(columns), meta)


def synthesize_columns(spec: ModelSpec, policy: Policy, workload: Workload, *, on_gpu: bool = True,
                       kv_block: int | None = None, cuda_graphs: bool = False,
                       engine: EngineChoice = MPSIM_KERNELS, tp: int = 1, pp: int = 1,
                       micro_batches: int = 1) -> tuple[TraceColumns, TraceMeta]:
    """`synthesize`'s trace as numpy columns and its metadata, without pandas."""
    L, M = workload.prompt_len, micro_batches
    b = micro_batch_size(workload.batch, M)
    plan = parallel_plan(spec, engine.name, tp, pp)
    target = engine_target(engine.name, policy, model_heads(rank_spec(spec, tp).as_dict()),
                           arch=engine.arch, sms=engine.sms, on_gpu=on_gpu, method=engine.method)
    if target is not None and cuda_graphs:
        raise MpsimInputError(f"CUDA-graph decode (--cuda-graphs) sizes mpsim's own decode attention; "
                              f"engine {engine.name!r} launches its own attention kernels")
    capacity = lc.graph_kv_capacity(L + workload.gen_len) if cuda_graphs else None
    table = _Columns()
    prefill = PassShape("prefill", 0, b, L, L, policy.weights_at("prefill", 0), policy.kv_bits,
                        kv_block, on_gpu, target=target, plan=plan, kv_format=policy.kv_format)
    prefill_rows = micro_batched(pass_launches(spec, prefill), M)
    check_size(len(prefill_rows), workload)
    table.add_pass(prefill_rows, np.array([0]))
    for weights, steps in decode_segments(policy, workload):
        first = PassShape("decode", int(steps[0]), b, 1, L + int(steps[0]), weights,
                          policy.kv_bits, kv_block, on_gpu, capacity, target, plan, policy.kv_format)
        table.add_pass(micro_batched(pass_launches(spec, first), M), steps,
                       decode_attention_costs(spec, first, steps))
    meta = TraceMeta("synth", spec.as_dict(), policy.spelling, workload.as_dict(),
                     {"launch_configs": "gpu" if on_gpu else "interpreter"}
                     | ({"cuda_graphs_kv_capacity": capacity} if capacity is not None else {})
                     | ({"engine_arch": target.arch, "engine_sms": target.sms} if target else {})
                     | ({"quant_method": target.method} if target and target.method else {})
                     | ({"parallel": plan.describe() | {"micro_batches": M}}
                        if not plan.single or M > 1 else {}),
                     engine=engine.name)
    return table.columns(), meta


def parallel_plan(spec: ModelSpec, engine: str, tp: int = 1, pp: int = 1) -> ParallelPlan:
    """The plan of `tp` x `pp` devices for `spec`, its all-reduce the engine file's (one clear
    error for a plan the model cannot take: mpsim/parallel.py check_plan)."""
    if tp == 1 and pp == 1:
        return SINGLE
    plan = ParallelPlan(tp, pp, allreduce_library(get_engine(engine)))
    check_plan(spec, plan)
    return plan


def micro_batch_size(batch: int, micro_batches: int) -> int:
    """Sequences per micro-batch; `micro_batches` must be a whole number >= 1 dividing the batch."""
    M = micro_batches
    if isinstance(M, bool) or not isinstance(M, int) or M < 1:
        raise MpsimInputError(f"--micro-batches {M!r}: expected a whole number >= 1")
    if batch % M:
        raise MpsimInputError(f"--micro-batches {M} does not divide the batch of {batch} sequences; "
                              f"expected a divisor of {batch}")
    return batch // M


def micro_batched(rows: list[Row], micro_batches: int) -> list[Row]:
    """One pass's rows (at batch/M sequences) once per micro-batch, in launch order: micro-batch 0's
    whole pass through every stage, then micro-batch 1's, ... (the engine issues them so; the
    simulator runs the stages concurrently, mpsim/sim/pipeline.py)."""
    if micro_batches == 1:
        return rows
    return [{**r, "micro_batch": m} for m in range(micro_batches) for r in rows]


def decode_segments(policy: Policy, workload: Workload) -> Iterator[tuple[WeightChoice, np.ndarray]]:
    """Runs of consecutive decode steps (1-based) that read the same weight format."""
    steps = np.arange(1, workload.decode_steps + 1)
    if len(steps) == 0:
        return
    bits = np.array([policy.decode_bits(int(s)) for s in steps])
    cuts = np.flatnonzero(np.diff(bits)) + 1
    for run in np.split(steps, cuts):
        yield policy.weights_at("decode", int(run[0])), run


@dataclass(frozen=True)
class _Pass:
    """One pass's costed rows, repeated at every step of `steps`; with `attention` (one value per
    step for each of ATTENTION_STEP_COLUMNS) the attention rows take their step's values."""

    rows: Sequence[Row]
    steps: np.ndarray
    attention: dict[str, list[Any]] | None = None

    @property
    def launches(self) -> int:
        return len(self.rows) * len(self.steps)

    def attention_rows(self) -> np.ndarray:
        return np.flatnonzero([r["op"] == "attention" for r in self.rows])


class _Columns:
    """Trace columns under construction. Passes are collected first; `columns` then allocates each
    column once, in its storage width (text: codes into the sorted vocabulary), and fills it pass
    by pass with broadcast writes: no tiled copies, no concatenation."""

    def __init__(self) -> None:
        self.passes: list[_Pass] = []

    def add_pass(self, rows: Sequence[Row], steps: np.ndarray,
                 attention: dict[str, list[Any]] | None = None) -> None:
        self.passes.append(_Pass(rows, steps, attention))

    def columns(self) -> TraceColumns:
        """The trace columns: COLUMNS in order, each in its storage type, text names sorted."""
        n = sum(p.launches for p in self.passes)
        out: TraceColumns = {
            "launch_id": Numbers(np.arange(n, dtype=np.int64), np.zeros(n, dtype=bool)),
            "stream": Numbers(np.zeros(n, dtype=np.int32), np.zeros(n, dtype=bool)),
        }
        for col in COLUMNS:
            if col not in out:
                out[col] = self._text(col, n) if col in TEXT else self._numbers(col, n)
        return {c: out[c] for c in COLUMNS}

    def _fill(self, col: str, out: np.ndarray, encode: Any, mask: np.ndarray | None = None) -> None:
        """Write every pass's values of `col` into `out` (and NA flags into `mask`); `encode(values,
        rows)` gives (values, NA flags) of a list of row values as arrays."""
        offset = 0
        for p in self.passes:
            block = slice(offset, offset + p.launches)
            shape = (len(p.steps), len(p.rows))
            offset += p.launches
            if col == "step":
                out[block].reshape(shape)[:] = p.steps[:, None]
                continue
            values, na = encode([r.get(col) for r in p.rows], p.rows)
            out[block].reshape(shape)[:] = values
            if mask is not None:
                mask[block].reshape(shape)[:] = na
            if p.attention is not None and col in ATTENTION_STEP_COLUMNS:
                attn = p.attention_rows()
                step_values, _ = encode(p.attention[col], [p.rows[attn[0]]] * len(p.steps))
                out[block].reshape(shape)[:, attn] = step_values[:, None]

    def _text(self, col: str, n: int) -> Text:
        values = {v for p in self.passes for v in [r.get(col) for r in p.rows]
                  + (p.attention[col] if p.attention and col in p.attention else [])}
        names = sorted(v for v in values if v is not None)
        code_of = {v: i for i, v in enumerate(names)}
        codes = np.empty(n, dtype=np.int8 if len(names) < 127 else np.int32)

        def encode(vals: list[Any], rows: Sequence[Row]) -> tuple[np.ndarray, None]:
            return np.array([-1 if v is None else code_of[v] for v in vals], dtype=codes.dtype), None

        self._fill(col, codes, encode)
        return Text(codes, tuple(names))

    def _numbers(self, col: str, n: int) -> Numbers:
        values, mask = np.empty(n, dtype=numpy_dtype(col)), np.zeros(n, dtype=bool)
        self._fill(col, values, lambda vals, rows: _encode(col, vals, rows), mask)
        return Numbers(values, mask)


def _encode(col: str, values: list[Any], rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray]:
    """(values in the storage width, NA flags) of a number or boolean column; `rows[i]` is the
    launch `values[i]` belongs to (named when a value is too large for the column)."""
    mask = np.array([v is None for v in values], dtype=bool)
    storage = STORAGE[col]
    if storage == "boolean":
        return np.array([bool(v) for v in values], dtype=bool), mask
    if storage == "Float64":
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64), mask
    info = np.iinfo(storage.lower())
    for i, v in enumerate(values):
        if v is not None and not info.min <= v <= info.max:
            raise _too_large(col, v, rows[i], storage)
    return np.array([0 if v is None else v for v in values], dtype=storage.lower()), mask


def _too_large(col: str, value: int, row: Row, storage: str) -> MpsimInputError:
    return MpsimInputError(
        f"the workload is too large to synthesize: the {row.get('phase')} launch {row.get('kernel')} "
        f"(module {row.get('module')}) would have {col} = {value:,}, beyond what the trace's {storage} "
        f"column holds ({np.iinfo(storage.lower()).max:,}); use a shorter prompt or generation")
