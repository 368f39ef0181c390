"""The pipeline schedule: a trace's priced launches placed on the timelines of its pipeline stages.

Stages are different devices, so they run concurrently (docs/parallelism.md#the-pipeline-schedule).
A trace's launches fall into segments: contiguous runs of one (phase, step, micro_batch, stage), in
issue order; a stage's segment holds its layers and, after its last layer, the send/recv to the
next stage (the send occupies the sending stage's stream: an assumption; NCCL's send/recv kernels
run on both GPUs, and the receiver's side is not priced separately). Within a segment the launches
run back to back in issue order at their own prices (the replay's, memo included: nothing here
prices a launch). A segment starts when

  (a) the same micro-batch's previous segment (its stage s-1 segment with the send/recv, or, for
      the first stage of a decode step, its last-stage segment of the previous step: sampling
      feeds the next token) is done, and
  (b) the stage's previous segment, in issue order, is done,

which is the max-plus recurrence end[r] = max(end[prev of the micro-batch], end[prev on the stage])
+ duration[r], one pass over the segments. No 1F1B: inference is forward only; the micro-batches
are vLLM's virtual engines (pp batches in flight, each through every stage in turn). Where there is
one stage or one micro-batch, every segment waits for the one before it: the launches run back to
back, and the ends are the plain cumulative sum (the same numbers as the serial timeline, exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class PipelineSchedule:
    """Per launch its start and end on its stage's timeline; per stage its busy seconds."""

    start: np.ndarray
    end: np.ndarray
    stage: np.ndarray  # per launch, the stage whose timeline it is on
    stage_busy_s: tuple[float, ...]
    makespan_s: float
    pipelined: bool  # False: one stage or one micro-batch, launches back to back (the serial sum)

    @property
    def stages(self) -> int:
        return len(self.stage_busy_s)

    @property
    def bubble_fraction(self) -> float:
        """The share of the stages' time (stages x makespan) no launch runs in."""
        span = self.stages * self.makespan_s
        return 1.0 - sum(self.stage_busy_s) / span if span > 0 else 0.0


def _int_column(rows: pd.DataFrame, name: str) -> np.ndarray:
    """A stage or micro-batch column as int64 (absent or <NA>: 0, as files before it read)."""
    if name not in rows.columns:
        return np.zeros(len(rows), dtype=np.int64)
    return rows[name].to_numpy(dtype=np.int64, na_value=0)


def segment_starts(rows: pd.DataFrame, stage: np.ndarray, micro: np.ndarray) -> np.ndarray:
    """The first launch of every segment: where phase, step, micro_batch or stage changes."""
    change = np.zeros(len(rows), dtype=bool)
    change[0] = True
    for values in (stage, micro, rows["step"].to_numpy(dtype=np.int64),
                   rows["phase"].cat.codes.to_numpy() if isinstance(rows["phase"].dtype, pd.CategoricalDtype)
                   else rows["phase"].astype(str).to_numpy()):
        change[1:] |= values[1:] != values[:-1]
    return np.flatnonzero(change)


def schedule(rows: pd.DataFrame, time_s: np.ndarray) -> PipelineSchedule:
    """The launches of `rows`, priced `time_s` each, placed on their stages' timelines."""
    time_s = np.asarray(time_s, dtype=float)
    stage = _int_column(rows, "stage")
    stages = int(stage.max()) + 1 if len(stage) else 1
    busy = tuple(float(b) for b in np.bincount(stage, weights=time_s, minlength=stages))
    end = np.cumsum(time_s)
    micro = _int_column(rows, "micro_batch") if stages > 1 else stage
    if stages == 1 or not (micro != micro[0]).any():  # one chain: back to back, the serial sum
        start = np.concatenate([[0.0], end[:-1]])
        return PipelineSchedule(start, end, stage, busy, float(end[-1]) if len(end) else 0.0, False)
    first = segment_starts(rows, stage, micro)
    before = np.concatenate([[0.0], end[:-1]])[first]  # the serial sum before each segment
    last = np.append(first[1:], len(rows)) - 1
    duration = end[last] - before
    seg_start = _recurrence(stage[first], micro[first], duration)
    shift = np.repeat(seg_start - before, np.diff(np.append(first, len(rows))))
    end = end + shift
    return PipelineSchedule(end - time_s, end, stage, busy, float(end.max()), True)


def _recurrence(stage: np.ndarray, micro: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Each segment's start: the later of its micro-batch's previous segment's end and its stage's
    previous segment's end (the max-plus recurrence)."""
    stage_end: dict[int, float] = {}
    micro_end: dict[int, float] = {}
    starts = np.empty(len(duration))
    for r, (s, m, d) in enumerate(zip(stage.tolist(), micro.tolist(), duration.tolist(), strict=True)):
        begin = max(stage_end.get(s, 0.0), micro_end.get(m, 0.0))
        starts[r] = begin
        stage_end[s] = micro_end[m] = begin + d
    return starts
