"""The launch recorder: kernel launchers report each launch here while a capture is running.

The engine opens a Recorder and sets the context (phase, step, layer, module) as it walks the model;
each kernel launcher wraps its launch in `rec.launch(...)` with the shape and format columns. Times
are CUDA events on a GPU (resolved in one synchronize at `finish`) or host wall time around the
(synchronous) launch under the Triton interpreter, and the `device` column says which.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import COLUMNS, KV_FORMAT_OF_BITS

_ACTIVE: ContextVar[Recorder | None] = ContextVar("mpsim_active_recorder", default=None)

HOST_TIMER_DEVICE = "cpu (triton interpreter; host wall time)"
ANNOTATION_PREFIX = "mpsim/"


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else str(value)


def active_recorder() -> Recorder | None:
    """The recorder of the capture in progress, or None when nothing is being recorded."""
    return _ACTIVE.get()


@dataclass
class _Pending:
    fields: dict[str, Any]
    start: Any  # torch.cuda.Event or host ns
    end: Any


class Recorder:
    """Collects one TraceRow per launch. Use as a context manager to make it the active recorder."""

    def __init__(self, use_cuda_events: bool = False, device_name: str | None = None,
                 annotate: bool = False) -> None:
        self.use_cuda_events = use_cuda_events
        self.annotate = annotate  # wrap launches in profiler ranges "mpsim/<row JSON>" (traces.kineto)
        self.device_name = device_name or (None if use_cuda_events else HOST_TIMER_DEVICE)
        self.context: dict[str, Any] = {"phase": "prefill", "step": 0, "layer": -1, "module": ""}
        self._pending: list[_Pending] = []
        self._token: Token[Recorder | None] | None = None

    def __enter__(self) -> Recorder:
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None

    @contextlib.contextmanager
    def scope(self, **context: Any) -> Iterator[None]:
        """Temporarily set phase / step / layer / module for the launches inside."""
        unknown = set(context) - set(self.context)
        if unknown:
            known = sorted(self.context)
            raise ValueError(f"unknown recorder context key(s) {sorted(unknown)}; known: {known}")
        saved = dict(self.context)
        self.context.update(context)
        try:
            yield
        finally:
            self.context = saved

    @contextlib.contextmanager
    def launch(self, *, kernel: str, op: str, grid: tuple[int, ...], config: dict[str, Any],
               **columns: Any) -> Iterator[None]:
        """Time the launch inside the block and queue its row."""
        fields = dict(self.context, kernel=kernel, op=op, grid=json.dumps(list(grid)),
                      config=json.dumps(config, sort_keys=True), **columns)
        annotation = contextlib.nullcontext()
        if self.annotate:
            import torch

            # Kineto writes range names into its JSON without escaping quotes: base64 keeps it valid.
            payload = json.dumps(fields, sort_keys=True, default=_plain).encode()
            label = ANNOTATION_PREFIX + base64.urlsafe_b64encode(payload).decode()
            annotation = torch.profiler.record_function(label)
        with annotation:
            yield from self._timed(fields)

    def _timed(self, fields: dict[str, Any]) -> Iterator[None]:
        if self.use_cuda_events:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
        else:
            start = time.perf_counter_ns()
            yield
            end = time.perf_counter_ns()
        self._pending.append(_Pending(fields, start, end))

    def finish(self) -> list[dict[str, Any]]:
        """Resolve the timings (one synchronize on a GPU) and return the rows in launch order."""
        if self.use_cuda_events and self._pending:
            import torch

            torch.cuda.synchronize()
        rows = [self._row(i, p) for i, p in enumerate(self._pending)]
        self._pending = []
        return rows

    def _row(self, launch_id: int, pending: _Pending) -> dict[str, Any]:
        if self.use_cuda_events:
            measured = float(pending.start.elapsed_time(pending.end)) * 1e3
        else:
            measured = (pending.end - pending.start) / 1e3
        cost = launch_cost(pending.fields)
        kv = ({"kv_format": KV_FORMAT_OF_BITS[int(pending.fields["k_bits"])]}
              if pending.fields.get("op") in ("attention", "kv_quant") else {})  # mpsim's int caches
        return {**dict.fromkeys(COLUMNS), **kv, "launch_id": launch_id, "stream": 0, "tp": 1, "stage": 0,
                "micro_batch": 0,
                "flops": cost.flops,
                "bytes_read": cost.bytes_read, "bytes_written": cost.bytes_written,
                "measured_us": measured, "device": self.device_name, **pending.fields}
