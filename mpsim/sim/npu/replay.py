"""A trace on the NPU: steps (the prefill, each decode pass) through the step model, memoized by signature.

A step is a maximal run of rows with the same (phase, step). Its signature is the sequence of its
launch keys (mpsim.sim.keys: shapes, formats, config, bucketed KV length, activation bytes left in
SRAM by the previous launch), so the 2048 decode steps of a long generation collapse to a few dozen
distinct steps (KV-length buckets x precision phases). Each distinct step runs once in SimPy
(step.py) or comes from the memo; its per-launch columns are then laid out step after step. Steps do
not overlap each other (the next token's embedding waits for this step's sample).

Per launch: `end_s` (compute done; a fused operator ends with its host, a prologue when its host
starts), `time_s` = its end minus the previous launch's end (additive: a step's launches sum to the
step's wall time), `overhead_s` the dispatch it waited for, `kernel_s` the rest, and the overlapped
`busy_start_s`/`busy_end_s` (first DMA of its operands to its last write). The time parts of a fused
item's share are its host's (step.py `StepSim.parts`).
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pandas as pd

from mpsim.hw_models.schema import NpuSpec
from mpsim.sim.keys import key_text, launch_keys, rep_row
from mpsim.sim.memo import LaunchMemo, namespace
from mpsim.sim.npu.kernel_model import OpWork, op_work
from mpsim.sim.npu.rates import NpuRates, npu_rates, npu_resident_cap
from mpsim.sim.npu.step import FLOAT_COLUMNS, PART_NAMES, STEP_UTILS, StepOutcome, simulate_step
from mpsim.sim.params import SimParams
from mpsim.sim.result import UNITS


def step_bounds(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) row positions of every step: runs of equal (phase, step)."""
    phase = pd.factorize(rows["phase"])[0]
    step = rows["step"].to_numpy()
    change = np.ones(len(rows), dtype=bool)
    change[1:] = (phase[1:] != phase[:-1]) | (step[1:] != step[:-1])
    starts = np.flatnonzero(change)
    return starts, np.append(starts[1:], len(rows))


def replay_npu(rows: pd.DataFrame, hw: NpuSpec, params: SimParams, memo: LaunchMemo) -> pd.DataFrame:
    r = npu_rates(hw)
    codes, reps = launch_keys(rows, npu_resident_cap(r))
    rep_rows = [rep_row(x) for x in reps.to_dict("records")]
    starts, ends = step_bounds(rows)
    signatures: dict[bytes, int] = {}
    step_sig = np.fromiter((signatures.setdefault(codes[a:b].tobytes(), len(signatures))
                            for a, b in zip(starts, ends, strict=True)), dtype=np.int64,
                           count=len(starts))
    texts: dict[int, str] = {}
    works: dict[int, OpWork] = {}
    ns = namespace(hw, params, "npu-step")
    outcomes: list[StepOutcome] = []
    for sig in signatures:
        sig_codes = np.frombuffer(sig, dtype=codes.dtype)
        for c in np.unique(sig_codes):
            if int(c) not in texts:
                texts[int(c)] = key_text(rep_rows[int(c)])
        key = hashlib.sha256("\n".join(texts[int(c)] for c in sig_codes).encode()).hexdigest()
        found = memo.get_step(ns, key)
        if found is None:
            t0 = time.perf_counter()
            for c in np.unique(sig_codes):
                if int(c) not in works:
                    row = rep_rows[int(c)]
                    works[int(c)] = op_work(row, r, params, float(row["resident"]))
            outcome = simulate_step([works[int(c)] for c in sig_codes], r, params, hw.energy)
            memo.sim_seconds += time.perf_counter() - t0
            memo.put_step(ns, key, outcome.as_dict())
        else:
            outcome = StepOutcome.from_dict(found)
        outcomes.append(outcome)
    return _lay_out(outcomes, step_sig, ends - starts, r)


def _lay_out(outcomes: list[StepOutcome], step_sig: np.ndarray, lengths: np.ndarray,
             r: NpuRates) -> pd.DataFrame:
    """Per-row columns: every step's outcome after the previous step's end."""
    stacked = [np.column_stack([o.columns[c] for c in FLOAT_COLUMNS]) for o in outcomes]
    table = np.concatenate([stacked[s] for s in step_sig]) if len(step_sig) else \
        np.zeros((0, len(FLOAT_COLUMNS)))
    j = {c: i for i, c in enumerate(FLOAT_COLUMNS)}
    durations = np.asarray([outcomes[s].duration_s for s in step_sig])
    offset = np.repeat(np.cumsum(durations) - durations, lengths)
    for c in ("end", "busy_start", "busy_end"):
        table[:, j[c]] += offset
    end = table[:, j["end"]]
    kernel = np.diff(end, prepend=0.0) - table[:, j["overhead"]]
    sums = [sum(o.columns[c] for c in PART_NAMES) for o in outcomes]  # per step, then per launch
    _cap_parts(table, [j[c] for c in PART_NAMES], kernel,
               np.concatenate([sums[s] for s in step_sig]) if len(step_sig) else np.zeros(0))
    names = sorted({b for o in outcomes for b in o.bound})
    index = {b: i for i, b in enumerate(names)}
    bound_codes = np.concatenate([np.asarray([index[b] for b in outcomes[s].bound], dtype=np.int64)
                                  for s in range(len(outcomes))]) if outcomes else np.zeros(0, int)
    firsts = np.cumsum([0] + [len(o.bound) for o in outcomes])
    per_sig = [bound_codes[firsts[s]:firsts[s + 1]] for s in range(len(outcomes))]
    bounds = np.concatenate([per_sig[s] for s in step_sig]) if len(step_sig) else np.zeros(0, int)
    # One float block for the step model's columns (no per-column copies of ~10^6 rows).
    frame = pd.DataFrame(table, columns=[_NAMES.get(c, c) for c in FLOAT_COLUMNS], copy=False)
    frame["kernel_s"] = kernel
    frame["cycles"] = kernel * r.clock_hz
    frame["bound"] = pd.Categorical.from_codes(bounds, categories=names)
    frame["part_fixed_s"] = 0.0
    frame["part_comm_s"] = 0.0  # an NPU runs no parallel plan (collectives: GPUs of a node)
    for c in ("bytes_l2", "ctas_per_sm", "waves", *(f"util_{u}" for u in UNITS if u not in STEP_UTILS)):
        frame[c] = np.nan
    return frame


def _cap_parts(table: np.ndarray, cols: list[int], kernel: np.ndarray, sums: np.ndarray) -> None:
    """The parts (`cols` of the table, adding up to `sums`) were counted in the step's cycles, a
    share is a difference of ends: where they exceed the share (the ends' float noise, a few
    launches), cap them in order at what is left, so latency, the rest, is never below 0."""
    over = np.flatnonzero(sums > kernel)
    left = np.maximum(kernel[over], 0.0)
    for c in cols:
        capped = np.minimum(table[over, c], left)
        table[over, c] = capped
        left = left - capped


_NAMES = {"end": "end_s", "busy_start": "busy_start_s", "busy_end": "busy_end_s",
          "overhead": "overhead_s", "energy_dyn": "energy_dyn_j",
          **{c: f"{c}_s" for c in PART_NAMES}}
