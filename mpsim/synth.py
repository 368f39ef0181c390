"""Trace synthesis: the launch list of a whole generation from model spec + policy + workload.

One prefill pass over the prompt (it yields the first new token), then gen_len - 1 decode passes.
Decode passes that share a weight format differ only in their attention rows (the KV length grows),
so each such segment is built once by the launch plan (mpsim/launch_plan.py, the one place launch
rows are built) and tiled column by column; only the attention columns (kv_len, grid, config,
FLOPs, bytes) are computed per step, once per step for all layers. No per-row Python objects: a
2.4M-launch trace is a few dozen numpy arrays until it becomes one DataFrame in the storage dtypes
(traces/schema.py STORAGE).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.launch_plan import ATTENTION_STEP_COLUMNS, PassShape, Row, decode_attention_costs, pass_launches
from mpsim.models import ModelSpec
from mpsim.policy import Policy, WeightChoice
from mpsim.traces.schema import COLUMNS, STORAGE
from mpsim.traces.trace import Trace, TraceMeta
from mpsim.traces.validate import coerce_types
from mpsim.workload import Workload, check_size

TEXT = tuple(c for c, t in COLUMNS.items() if t == "string")


def synthesize(spec: ModelSpec, policy: Policy, workload: Workload, *, on_gpu: bool = True,
               kv_block: int | None = None) -> Trace:
    """The trace a generation would record, with analytic bytes/FLOPs and no measured times."""
    b, L = workload.batch, workload.prompt_len
    table = _Columns()
    prefill = PassShape("prefill", 0, b, L, L, policy.weights_at("prefill", 0), policy.kv_bits,
                        kv_block, on_gpu)
    prefill_rows = pass_launches(spec, prefill)
    check_size(len(prefill_rows), workload)
    table.add_pass(prefill_rows, np.array([0]))
    for weights, steps in decode_segments(policy, workload):
        first = PassShape("decode", int(steps[0]), b, 1, L + int(steps[0]), weights,
                          policy.kv_bits, kv_block, on_gpu)
        table.add_pass(pass_launches(spec, first), steps, decode_attention_costs(spec, first, steps))
    meta = TraceMeta("synth", spec.as_dict(), policy.spelling, workload.as_dict(),
                     {"launch_configs": "gpu" if on_gpu else "interpreter"})
    return Trace(table.frame(), meta)


def decode_segments(policy: Policy, workload: Workload) -> Iterator[tuple[WeightChoice, np.ndarray]]:
    """Runs of consecutive decode steps (1-based) that read the same weight format."""
    steps = np.arange(1, workload.decode_steps + 1)
    if len(steps) == 0:
        return
    bits = np.array([policy.decode_bits(int(s)) for s in steps])
    cuts = np.flatnonzero(np.diff(bits)) + 1
    for run in np.split(steps, cuts):
        yield policy.weights_at("decode", int(run[0])), run


class _Columns:
    """Trace columns under construction: per column a list of numpy chunks (values and an NA mask
    for numbers and booleans, codes into one vocabulary per text column), concatenated once."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}
        self.masks: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS if c not in TEXT}
        self.vocab: dict[str, dict[str, int]] = {c: {} for c in TEXT}

    def add_pass(self, rows: Sequence[Row], steps: np.ndarray,
                 attention: dict[str, list[Any]] | None = None) -> None:
        """One pass's rows repeated for every step of `steps`; with `attention` (one value per step
        for each of ATTENTION_STEP_COLUMNS), the attention rows take the values of their step."""
        n, per_pass = len(steps), len(rows)
        attn = np.flatnonzero([r["op"] == "attention" for r in rows])
        where = (np.arange(n)[:, None] * per_pass + attn[None, :]).ravel() if attention else None
        for col in COLUMNS:
            if col in ("launch_id", "stream", "step"):
                continue
            values, mask = self._template(col, [r.get(col) for r in rows], rows)
            values = np.tile(values, n)
            if attention is not None and where is not None and col in ATTENTION_STEP_COLUMNS:
                step_values, _ = self._template(col, attention[col], [rows[attn[0]]] * n)
                values[where] = np.repeat(step_values, len(attn))
            self.chunks[col].append(values)
            if mask is not None:
                self.masks[col].append(np.tile(mask, n))
        self.chunks["step"].append(np.repeat(steps.astype(np.int64), per_pass))
        self.masks["step"].append(np.zeros(n * per_pass, dtype=bool))

    def _template(self, col: str, values: list[Any],
                  rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray | None]:
        """Codes of a text column, or (values in the storage width, NA mask) of a number or boolean
        column; `rows[i]` is the launch `values[i]` belongs to (named when a value is too large)."""
        if col in TEXT:
            vocab = self.vocab[col]
            return np.array([-1 if v is None else vocab.setdefault(v, len(vocab)) for v in values],
                            dtype=np.int32), None
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

    def frame(self) -> pd.DataFrame:
        """The trace rows: COLUMNS in order, each in its storage dtype."""
        out: dict[str, Any] = {}
        for col in COLUMNS:
            if col in ("launch_id", "stream"):
                continue
            values = np.concatenate(self.chunks[col])
            if col in TEXT:
                out[col] = _categorical(values, self.vocab[col])
            else:
                out[col] = _numbers(col, values, np.concatenate(self.masks[col]))
        n = len(out["op"])
        out["launch_id"] = pd.array(np.arange(n, dtype=np.int64), dtype=STORAGE["launch_id"])
        out["stream"] = pd.array(np.zeros(n, dtype=np.int32), dtype=STORAGE["stream"])
        return coerce_types(pd.DataFrame({c: out[c] for c in COLUMNS}, copy=False), "synthesized trace")


def _categorical(codes: np.ndarray, vocab: dict[str, int]) -> pd.Categorical:
    """Codes into `vocab` as a categorical with sorted categories (the storage form)."""
    names = list(vocab)
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names) + 1, dtype=np.int32)
    rank[order] = np.arange(len(names), dtype=np.int32)
    rank[-1] = -1  # NA stays NA (code -1 indexes the last slot)
    return pd.Categorical.from_codes(rank[codes], pd.Index([names[i] for i in order], dtype="str"))


def _numbers(col: str, values: np.ndarray, mask: np.ndarray) -> Any:
    """Values (already in the storage width) and NA mask as the storage's pandas array, no copy."""
    storage = STORAGE[col]
    if storage == "boolean":
        return pd.arrays.BooleanArray(values, mask)
    if storage == "Float64":
        return pd.arrays.FloatingArray(values, mask)
    return pd.arrays.IntegerArray(values, mask)


def _too_large(col: str, value: int, row: Row, storage: str) -> MpsimInputError:
    return MpsimInputError(
        f"the workload is too large to synthesize: the {row.get('phase')} launch {row.get('kernel')} "
        f"(module {row.get('module')}) would have {col} = {value:,}, beyond what the trace's {storage} "
        f"column holds ({np.iinfo(storage.lower()).max:,}); use a shorter prompt or generation")
