"""What an engine-benchmarks row is, set up as mpsim runs: the engine file, GPU, model, policy per
published precision (with its tensor-parallel degree, the issue that owns it and what its ratio is
taken against), the workload and how the row counts. The readers (engine_rows.py, engine_rows_tp.py)
fill these from ../shared/engine-benchmarks.md; nothing here holds a published number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mpsim.models import ModelSpec

Count = Literal["whole-run", "whole-run-per-gpu", "decode-rate", "decode-log", "latency", "served"]
COUNTS: dict[Count, str] = {
    "whole-run": "output tokens / s over the whole run, prefill included",
    "whole-run-per-gpu": "output tokens / s per GPU over the whole run, prefill included (the run's "
                         "tokens / s over its tensor-parallel GPUs)",
    "decode-rate": "steady-state decode tokens / s (prefill left out)",
    "decode-log": "decode tokens / s over the engine's last logged window of decode passes (the "
                  "row's `log`: passes per log line and the warm-up's passes before the run)",
    "latency": "seconds per request (the whole batch's run, prefill included)",
    "served": "output tokens / s over the whole run of `mpsim serve` (every prompt arriving at 0 s, "
              "the engine's continuous batching); the batch column is the number of prompts",
}
SAME_SHAPES = ("llama-3-8b stands for Llama-3.1-8B: the same shapes (32 layers, hidden 4096, FFN 14336, "
               "32 query / 8 KV heads of 128, vocabulary 128256); only RoPE scaling differs")


@dataclass(frozen=True)
class Precision:
    label: str                              # as the row writes it
    policy: str                             # the mpsim policy that runs it
    published: tuple[float, ...] | None     # one per batch; None: the row publishes no absolute
    tp: int = 1                             # tensor-parallel GPUs (mpsim/parallel.py, --tp)
    owner: str = "23"                       # the issue whose Done-when this row is a test of
    base: str | None = None                 # label of the precision its ratio is taken against
                                            # (None: the row's first, the engine's bf16/fp16 run)
    batches: tuple[int, ...] | None = None  # its own batches where it ran fewer than the row's
    ratios: tuple[float, ...] | None = None  # published ratios where the row gives only those
    method: str | None = None               # the checkpoint's quantization method where the engine
                                            # dispatches on it (engines/files.py QUANT_METHODS)


@dataclass(frozen=True)
class RowSetup:
    row: str
    engine: str                  # mpsim/data/engines/<engine>.yaml
    hw: str                      # hw_models/<hw>.yaml
    model: str                   # mpsim preset (or the name of `spec`)
    prompt_len: int
    gen_len: int
    batches: tuple[int, ...] | None  # None: the largest batch that fits the memory budget
    count: Count
    precisions: tuple[Precision, ...]  # the first is the engine's own bf16/fp16 row (the baseline)
    note: str
    spec: ModelSpec | None = None  # a model that is no mpsim preset, with its config's source
    scheduler: tuple[int, int] | None = None  # "served": (max_num_seqs, max_num_batched_tokens)
    log: tuple[int, int] | None = None  # "decode-log": (decode passes per log line, warm-up
                                        # decode passes counted before the run's)
    band: tuple[float, float] | None = None  # a qualitative row: each predicted ratio within this
                                             # band is its target (values and errors shown only)

    @property
    def baseline(self) -> Precision:
        return self.precisions[0]

    def base_of(self, p: Precision) -> Precision:
        """The precision `p`'s ratio is taken against (one clear error for an unknown label)."""
        label = p.base or self.baseline.label
        for q in self.precisions:
            if q.label == label:
                return q
        raise ValueError(f"engine row {self.row}: {p.label} is compared with {label!r}, which the row "
                         f"does not set up ({[q.label for q in self.precisions]})")

    def batches_of(self, p: Precision) -> tuple[int, ...] | None:
        return p.batches or self.batches
