"""Trace synthesis: the launch list of a whole generation from model spec + policy + workload.

One prefill pass over the prompt (it yields the first new token), then gen_len - 1 decode passes.
Decode passes that share a weight format differ only in their attention rows (the KV length grows),
so each such segment is built once and tiled, and only the attention rows are re-costed per step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import PassShape, Row, costed, pass_attention_row, pass_rows
from mpsim.models import ModelSpec
from mpsim.policy import Policy, WeightChoice
from mpsim.traces.schema import COLUMNS
from mpsim.traces.trace import Trace, TraceMeta
from mpsim.workload import Workload


def synthesize(spec: ModelSpec, policy: Policy, workload: Workload, *, on_gpu: bool = True,
               kv_block: int | None = None, cuda_graphs: bool = False) -> Trace:
    """The trace a generation would record, with analytic bytes/FLOPs and no measured times.
    `cuda_graphs`: decode attention configured as under CUDA-graph replay (mpsim/engine/graphs.py)."""
    b, L = workload.batch, workload.prompt_len
    capacity = lc.graph_kv_capacity(L + workload.gen_len) if cuda_graphs else None
    prefill = PassShape("prefill", 0, b, L, L, policy.weights_at("prefill", 0), policy.kv_bits,
                        kv_block, on_gpu)
    frames = [_costed_frame(pass_rows(spec, prefill))]
    for weights, steps in decode_segments(policy, workload):
        first = PassShape("decode", int(steps[0]), b, 1, L + int(steps[0]), weights,
                          policy.kv_bits, kv_block, on_gpu, capacity)
        frames.append(_tile(spec, first, steps))
    rows = pd.concat(frames, ignore_index=True)
    rows["launch_id"] = pd.array(np.arange(len(rows)), dtype="Int64")
    rows["stream"] = pd.array(np.zeros(len(rows), dtype=np.int64), dtype="Int64")
    meta = TraceMeta("synth", spec.as_dict(), policy.spelling, workload.as_dict(),
                     {"launch_configs": "gpu" if on_gpu else "interpreter"}
                     | ({"cuda_graphs_kv_capacity": capacity} if capacity is not None else {}))
    return Trace(rows.astype(COLUMNS)[list(COLUMNS)], meta)


def decode_segments(policy: Policy, workload: Workload) -> Iterator[tuple[WeightChoice, np.ndarray]]:
    """Runs of consecutive decode steps (1-based) that read the same weight format."""
    steps = np.arange(1, workload.decode_steps + 1)
    if len(steps) == 0:
        return
    bits = np.array([policy.decode_bits(int(s)) for s in steps])
    cuts = np.flatnonzero(np.diff(bits)) + 1
    for run in np.split(steps, cuts):
        yield policy.weights_at("decode", int(run[0])), run


def _costed_frame(rows: list[Row]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records([costed(r) for r in rows]).reindex(columns=list(COLUMNS))
    return frame.astype(COLUMNS)


def _tile(spec: ModelSpec, first: PassShape, steps: np.ndarray) -> pd.DataFrame:
    """Repeat one decode pass for every step of a segment, re-costing the attention rows."""
    template = _costed_frame(pass_rows(spec, first))
    per_pass = len(template)
    tiled = template.loc[np.tile(template.index.to_numpy(), len(steps))].reset_index(drop=True)
    step_of_row = np.repeat(steps, per_pass)
    tiled["step"] = step_of_row
    is_attn = (tiled["op"] == "attention").to_numpy()
    attn = _attention_by_step(spec, first, steps)
    idx = step_of_row[is_attn] - steps[0]
    for col, values in attn.items():
        kind = object if COLUMNS[col] == "string" else np.int64
        tiled.loc[is_attn, col] = np.asarray(values, dtype=kind)[idx]
    return tiled


def _attention_by_step(spec: ModelSpec, first: PassShape, steps: np.ndarray) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {c: [] for c in ("kv_len", "kv_tokens", "grid", "config", "flops",
                                                  "bytes_read", "bytes_written")}
    for s in steps:
        p = PassShape("decode", int(s), first.batch, 1, first.kv_len - first.step + int(s),
                      first.weights, first.kv_bits, first.kv_block, first.on_gpu, first.graph_capacity)
        row = costed(pass_attention_row(spec, p, 0))
        for col in out:
            out[col].append(row[col])
    return out
