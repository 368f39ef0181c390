"""CUDA-graph decoding: each decode step replays a captured graph instead of launching ~400 kernels
from Python one by one (prefill stays eager).

- One graph per (batch size, weight width, cache capacity), captured on first use: static input
  buffers (token ids, positions, cache slots, lengths) are filled before each replay, the logits
  buffer is copied out after it.
- The KV cache is pooled per (batch, capacity) so graphs stay valid across generations; capacity is
  the cache length rounded up (kernels/launch_config.py `graph_kv_capacity`), and decode attention
  launches with the split count sized for that capacity (`attention_decode_graph_config`), a grid that
  does not depend on the current KV length. Its lengths come from device memory, so shorter caches
  just leave trailing splits empty. `mpsim synth --cuda-graphs` reproduces that config.
- Trace rows: the launches seen while capturing are the graph's rows; every replay repeats them with
  its step and true KV length (analytic bytes recomputed). Their times come from the profiler's
  kernel records (`match_kernel_times`, protocol `kernel`); each replay's wall time is recorded too
  (protocol `graph`, mpsim/engine/capture.py).
Graphs need a CUDA device: `choose_decode_mode` falls back to eager decoding with a clear message
otherwise (the Triton interpreter has nothing to capture).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from mpsim.engine.backends import LayerCache
from mpsim.kernels.launch_config import graph_kv_capacity
from mpsim.kernels.runtime import on_gpu
from mpsim.traces.recorder import Recorder, active_recorder

if TYPE_CHECKING:
    from mpsim.engine.model import Decoder, PassInput

DECODE_MODES = ("auto", "graphs", "eager")
# Row fields the recorder computes itself; a replayed row passes the others back in.
COMPUTED = ("launch_id", "stream", "flops", "bytes_read", "bytes_written", "measured_us", "device")


def choose_decode_mode(requested: str, gpu: bool | None = None) -> tuple[str, str | None]:
    """('graphs' | 'eager', a message when graphs were wanted but cannot run)."""
    if requested not in DECODE_MODES:
        raise ValueError(f"decode mode {requested!r}: expected one of {DECODE_MODES}")
    gpu = on_gpu() if gpu is None else gpu
    if requested == "eager":
        return "eager", None
    if gpu:
        return "graphs", None
    return "eager", ("mpsim: CUDA graphs need a CUDA device; none here (Triton kernels run on the CPU "
                     "interpreter), so decode steps launch eagerly")


@dataclass
class _Graph:
    graph: Any                      # torch.cuda.CUDAGraph
    inp: PassInput                  # the static input buffers
    logits: torch.Tensor            # the static output buffer
    rows: list[dict[str, Any]]      # the launches captured, as row fields
    replays: list[dict[str, Any]] = field(default_factory=list)


class CudaGraphs:
    """torch.cuda's graph capture and replay (the one implementation outside tests)."""

    def capture(self, fn: Callable[[], torch.Tensor]) -> tuple[Any, torch.Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), Recorder():  # warm-up: compile, workspaces, RoPE table; unrecorded
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        return graph, out

    def replay(self, graph: Any) -> tuple[Any, Any]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        return start, end

    def elapsed_us(self, events: tuple[Any, Any]) -> float:
        torch.cuda.synchronize()
        return float(events[0].elapsed_time(events[1])) * 1e3


@dataclass
class DecodeGraphs:
    """The graphs and pooled caches of one decoder (`Decoder.graphs`)."""

    decoder: Decoder
    device: Any = field(default_factory=CudaGraphs)  # capture/replay; tests emulate it on the CPU
    graphs: dict[tuple[int, int, int], _Graph] = field(default_factory=dict)
    caches: dict[tuple[int, int], list[LayerCache]] = field(default_factory=dict)
    replay_log: list[dict[str, Any]] = field(default_factory=list)  # step, batch, bits, events

    def cache(self, batch: int, max_len: int) -> list[LayerCache]:
        capacity = graph_kv_capacity(max_len)
        key = (batch, capacity)
        if key not in self.caches:
            self.caches[key] = self.decoder.eager_cache(batch, capacity)
        return self.caches[key]

    def run(self, inp: PassInput, cache: list[LayerCache]) -> torch.Tensor:
        b, capacity = int(inp.ids.shape[0]), int(cache[0].k.data.shape[2])
        key = (b, inp.bits, capacity)
        g = self.graphs.get(key) or self._capture(key, inp, cache)
        for name in ("ids", "positions", "start", "lens"):
            getattr(g.inp, name).copy_(getattr(inp, name))
        # KV tokens over the batch for the replayed attention rows: a sync, before the replay and
        # only while recording (the capture itself could not read it)
        kv_tokens = int(inp.lens.sum().item()) if active_recorder() is not None else None
        events = self.device.replay(g.graph)
        self.replay_log.append({"step": inp.step, "batch": b, "bits": inp.bits, "events": events})
        replay_rows(g.rows, inp.step, inp.max_kv_len, kv_tokens)
        return g.logits.clone()

    def _capture(self, key: tuple[int, int, int], inp: PassInput, cache: list[LayerCache]) -> _Graph:
        static = replace(inp, ids=inp.ids.clone(), positions=inp.positions.clone(), start=inp.start.clone(),
                         lens=inp.lens.clone(), max_kv_len=key[2])
        with Recorder() as rec:  # the launches of the captured pass become the graph's rows
            graph, logits = self.device.capture(lambda: self.decoder.forward(static, cache))
        rows = [{k: v for k, v in r.items() if k not in COMPUTED} for r in rec.finish()]
        self.graphs[key] = _Graph(graph, static, logits, rows)
        return self.graphs[key]

    def replay_times(self) -> list[dict[str, Any]]:
        """Each replay's wall time (CUDA events around graph.replay(), resolved after a synchronize)."""
        out = [{"step": r["step"], "batch": r["batch"], "bits": r["bits"],
                "wall_us": self.device.elapsed_us(r["events"])} for r in self.replay_log]
        self.replay_log = []
        return out


def replay_rows(rows: list[dict[str, Any]], step: int, kv_len: int, kv_tokens: int | None = None) -> None:
    """Give the active recorder one row per captured launch: this step, the true KV length (the
    longest) and KV tokens over the batch on the attention rows (the launch config stays the
    captured one, sized for the capacity)."""
    rec = active_recorder()
    if rec is None:
        return
    for r in rows:
        fields = dict(r, step=step)
        if fields.get("op") == "attention":
            fields["kv_len"] = kv_len
            if kv_tokens is not None:
                fields["kv_tokens"] = kv_tokens
        kernel, op = fields.pop("kernel"), fields.pop("op")
        grid, config = json.loads(fields.pop("grid")), json.loads(fields.pop("config"))
        with rec.launch(kernel=kernel, op=op, grid=grid, config=config, **fields):
            pass  # the kernels ran inside the replay; their times come from the profiler


def kernel_records(trace_json: dict[str, Any]) -> list[tuple[str, float]]:
    """(name, duration us) of every GPU kernel in a Kineto/Chrome trace, in start order."""
    events = trace_json.get("traceEvents", []) if isinstance(trace_json, dict) else []
    kernels = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel"]
    kernels.sort(key=lambda e: float(e.get("ts", 0)))
    return [(str(e.get("name", "")), float(e.get("dur", 0.0))) for e in kernels]


def match_kernel_times(row_kernels: list[str], records: list[tuple[str, float]]) -> list[float | None]:
    """Each row's kernel time: the next kernel record, in order, whose name is the row's kernel (a
    Triton kernel's name may carry a suffix). Records of other kernels (torch's copies, the
    elementwise ops on static buffers) are skipped; a row with no record left gets None."""
    out: list[float | None] = []
    i = 0
    for name in row_kernels:
        while i < len(records) and not records[i][0].startswith(name):
            i += 1
        if i == len(records):
            out.append(None)
            continue
        out.append(records[i][1])
        i += 1
    return out


def use_decode_mode(decoder: Decoder, requested: str) -> str:
    """Switch `decoder` to CUDA-graph decoding when asked and possible; returns the mode in force
    (a fallback to eager is said on stderr)."""
    import sys

    mode, message = choose_decode_mode(requested)
    if mode == "graphs" and decoder.policy.kv_format == "fp8-e4m3":
        # the fp8 KV write places its codes by host indices (mpsim/engine/fp_ops.py): no graph capture
        mode, message = "eager", "an fp8 KV cache (+kv8f) decodes eagerly: its write reads host indices"
    if message is not None and requested != "eager":
        print(message, file=sys.stderr)
    decoder.graphs = DecodeGraphs(decoder) if mode == "graphs" else None
    return mode
