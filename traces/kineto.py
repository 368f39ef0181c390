"""Import of torch.profiler (Kineto) Chrome-trace JSON into an mpsim trace, where it carries enough.

A Kineto trace knows kernel names, grids and GPU durations, but not the shapes and formats a trace
row needs. mpsim's recorder, opened with `annotate=True` (`mpsim capture --profile FILE`), wraps each
launch in a profiler range named "mpsim/<base64 of the row's JSON>"; this importer joins each GPU
kernel to the range whose host interval contains its launch call (matched by correlation id), and
takes the measured time from the GPU kernel event. Without GPU kernels (a CPU-only profile, e.g.
the Triton interpreter) the range's own host duration is used and the `device` column says so.

What is lost: kernels launched outside an mpsim range (torch's own ops: copies, memsets, cuBLAS) are
dropped and counted in the metadata; multiple kernels inside one range (none in mpsim) are summed;
stream ids are Kineto's, not mpsim's.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import gzip
import json
from pathlib import Path
from typing import Any

from mpsim.traces.accounting import launch_cost
from mpsim.traces.errors import TraceError
from mpsim.traces.recorder import ANNOTATION_PREFIX
from mpsim.traces.trace import Trace, TraceMeta

LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")


GZIP_MAGIC = b"\x1f\x8b"


def read_json(path: Path) -> Any:
    """A Chrome/Kineto trace JSON, gzip-compressed or not (as torch.profiler writes `*.json.gz`): the
    file's first bytes decide, not its name."""
    data = path.read_bytes()
    if data[:2] == GZIP_MAGIC:
        data = gzip.decompress(data)
    return json.loads(data)


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        doc = read_json(path)
    except (OSError, ValueError, EOFError) as exc:
        raise TraceError(f"{path}: not a readable Kineto/Chrome trace JSON ({exc})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path}: expected a 'traceEvents' list")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _annotations(events: list[dict[str, Any]], path: Path) -> list[tuple[float, float, dict[str, Any]]]:
    out = []
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith(ANNOTATION_PREFIX) and e.get("cat") in ("user_annotation", "cpu_op", None):
            try:
                fields = json.loads(base64.urlsafe_b64decode(name[len(ANNOTATION_PREFIX):]))
            except (ValueError, binascii.Error):
                raise TraceError(f"{path}: annotation at ts={e.get('ts')} is not mpsim row JSON") from None
            out.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), fields))
    return sorted(out, key=lambda a: a[0])


def import_kineto(path: str | Path) -> Trace:
    path = Path(path)
    events = _load(path)
    ranges = _annotations(events, path)
    if not ranges:
        raise TraceError(f"{path}: no 'mpsim/' ranges; record with `mpsim capture --profile` so the "
                         "profile carries the shapes and formats a trace row needs")
    launch_ts = {e["args"]["correlation"]: float(e["ts"]) for e in events
                 if e.get("name") in LAUNCH_CALLS and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    gpu_us: dict[int, float] = {}
    dropped = 0
    starts = [r[0] for r in ranges]
    for k in kernels:
        ts = launch_ts.get(k.get("args", {}).get("correlation"))
        i = bisect.bisect_right(starts, ts) - 1 if ts is not None else -1
        if i < 0 or not ranges[i][0] <= ts <= ranges[i][1]:  # type: ignore[operator]
            dropped += 1
            continue
        gpu_us[i] = gpu_us.get(i, 0.0) + float(k.get("dur", 0.0))
    rows = [_row(n, fields, gpu_us.get(n, end - start), n in gpu_us)
            for n, (start, end, fields) in enumerate(ranges)]
    meta = TraceMeta("kineto", environment={"source_file": str(path), "dropped_kernels": dropped,
                                            "gpu_kernels_matched": len(gpu_us)})
    return Trace.from_rows(rows, meta)


def _row(launch_id: int, fields: dict[str, Any], measured_us: float, on_gpu: bool) -> dict[str, Any]:
    cost = launch_cost(fields)
    device = "gpu (kineto kernel time)" if on_gpu else "cpu (kineto host range)"
    return {"launch_id": launch_id, "stream": 0, "flops": cost.flops, "bytes_read": cost.bytes_read,
            "bytes_written": cost.bytes_written, "measured_us": measured_us, "device": device,
            **fields}
