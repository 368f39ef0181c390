"""Live trace capture: run a generation on the engine with a recorder open, return the trace.

Every kernel launch becomes a trace row with its grid, config, analytic bytes and measured time
(CUDA events on a GPU; host wall time under the Triton interpreter, and the `device` column says
which). A short warm-up generation runs first, unrecorded, so JIT compilation is not measured; on a
GPU with autotuning on (kernels/autotune.py) it runs the whole prompts, so every GEMM shape is tuned
before the recorded generation, and each row records the config that ran.
"""

from __future__ import annotations

import contextlib
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mpsim.engine.backends import make_backend
from mpsim.engine.generate import generate
from mpsim.engine.model import Decoder
from mpsim.engine.scheduler import FixedScheduler
from mpsim.engine.weights import dummy_weights, load_hf_weights
from mpsim.models import ModelSpec
from mpsim.policy import Policy
from mpsim.traces.recorder import Recorder
from mpsim.traces.trace import Trace, TraceMeta
from mpsim.workload import Workload


def environment(backend: str, on_gpu: bool) -> dict[str, Any]:
    import triton

    env: dict[str, Any] = {
        "backend": backend, "torch": torch.__version__, "triton": triton.__version__,
        "python": platform.python_version(), "host": platform.node(),
        "timer": "cuda_events" if on_gpu else "host_wall_time (triton interpreter)",
    }
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        env.update(device=props.name, sm_count=props.multi_processor_count,
                   memory_GB=round(props.total_memory / 1e9, 1), cuda=torch.version.cuda)
    else:
        env.update(device="cpu (triton interpreter)")
    return env


# The measurement protocol a capture's times follow, in the trace contract's vocabulary
# (traces/schema.py PROTOCOLS; costs in mpsim/sim/protocols.yaml): set here and only here, as the
# trace's `protocol` (schema version 3) and, for readers of older traces, environment["protocol"].
def capture_protocol(gpu: bool, decode_mode: str) -> str:
    """`kernel`: each row's GPU kernel time from the profiler's (CUPTI) records, what a CUDA-graph
    capture reports (graph replays have no per-launch events; each replay's wall time, protocol
    `graph`, is kept beside the rows); `eager`: each launch timed on its own as the engine issues it
    (CUDA events on a GPU, host wall time under the Triton interpreter)."""
    return "kernel" if gpu and decode_mode == "graphs" else "eager"


def capture_prompts(spec: ModelSpec, workload: Workload, seed: int) -> list[list[int]]:
    """The prompts a capture generates from: random token ids, `seed` fixed."""
    rng = np.random.default_rng(seed)
    size = (workload.batch, workload.prompt_len)
    prompts: list[list[int]] = rng.integers(0, spec.vocab, size=size).tolist()
    return prompts


def capture(spec: ModelSpec, policy: Policy, workload: Workload, *, weights: str | Path | None = None,
            seed: int = 0, profile: str | Path | None = None, decode: str = "auto",
            model: Any = None) -> Trace:
    """Generate with the Triton backend under `policy` and record every launch.

    `weights` is an HF-style folder; None means random weights at the real shapes (--dummy), with
    random quantized codes (no k-means) so large models load quickly; `model` (a TextModel) reads a
    model folder, quantized or not, instead. `decode`: auto | graphs | eager (graphs need a CUDA
    device; mpsim/engine/graphs.py). `profile` also writes a torch.profiler trace whose mpsim ranges
    `mpsim.traces.kineto.import_kineto` reads back (eager decoding).
    """
    from mpsim.engine.graphs import use_decode_mode
    from mpsim.kernels import autotune
    from mpsim.kernels.runtime import on_gpu

    backend = make_backend("triton")
    if model is not None:
        decoder = model.decoder(policy, backend)
    else:
        params = load_hf_weights(weights, spec) if weights is not None else dummy_weights(spec, seed)
        decoder = Decoder(params, policy, backend, dummy_seed=None if weights is not None else seed)
    mode = use_decode_mode(decoder, decode)
    prompts = capture_prompts(spec, workload, seed)
    if mode == "graphs":  # warm-up, unrecorded: JIT compilation, and every graph captured
        generate(decoder, prompts, workload.gen_len, FixedScheduler(policy))
        decoder.graphs.replay_log.clear()  # only the recorded generation's replays are reported
    elif on_gpu() and autotune.enabled():
        # the whole prompts for two tokens: every prefill and decode GEMM shape is autotuned here
        # (kernels/autotune.py), outside the recorded, timed generation
        generate(decoder, prompts, 2, FixedScheduler(policy))
    else:
        generate(decoder, [p[: min(8, len(p))] for p in prompts], 2, FixedScheduler(policy))
    gpu = on_gpu()
    kernel_times = gpu and mode == "graphs"
    activities = [torch.profiler.ProfilerActivity.CPU]
    activities += [torch.profiler.ProfilerActivity.CUDA] if gpu else []
    profiler = (torch.profiler.profile(activities=activities) if profile is not None or kernel_times
                else contextlib.nullcontext())
    with profiler as prof, Recorder(use_cuda_events=gpu, device_name=environment("triton", gpu)["device"],
                                    annotate=profile is not None and mode == "eager") as rec:
        start = time.perf_counter()
        generate(decoder, prompts, workload.gen_len, FixedScheduler(policy))
        if gpu:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    rows = rec.finish()
    env = environment("triton", gpu) | {"weights": str(weights or getattr(model, "folder", None) or "dummy"),
                                        "decode": mode, "protocol": capture_protocol(gpu, mode),
                                        "generation_wall_s": wall,
                                        "tokens_per_s": workload.batch * workload.gen_len / wall}
    if prof is not None:
        env |= _profiler_times(prof, rows, profile, kernel_times)
    if mode == "graphs":
        env["graph_replays"] = decoder.graphs.replay_times()  # protocol `graph`: wall time per replay
    meta = TraceMeta("capture", spec.as_dict(), policy.spelling, workload.as_dict(), env,
                     protocol=env["protocol"])
    return Trace.from_rows(rows, meta)


def _export(prof: Any, tmp: str, gz: bool) -> None:
    """The profiler's Chrome trace into `tmp`, gzip-compressed for a `*.gz` target (atomic_write's
    temporary name has no .gz, so torch.profiler would not compress it by itself)."""
    import gzip
    import shutil

    if not gz:
        prof.export_chrome_trace(tmp)
        return
    plain = tmp + ".json"
    try:
        prof.export_chrome_trace(plain)
        with open(plain, "rb") as src, gzip.open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
    finally:
        Path(plain).unlink(missing_ok=True)


def _profiler_times(prof: Any, rows: list[dict[str, Any]], profile: str | Path | None,
                    kernel_times: bool) -> dict[str, Any]:
    """Write the Kineto JSON (`--profile`, or a temporary file) and, under graph replay, take each row's
    measured time from its kernel record."""
    import tempfile

    from mpsim.engine.graphs import kernel_records, match_kernel_times
    from mpsim.traces.atomic import atomic_write
    from mpsim.traces.kineto import read_json

    path = Path(profile) if profile is not None else Path(tempfile.mkdtemp(prefix="mpsim-kineto-")) / "k.json"
    atomic_write(path, lambda tmp: _export(prof, tmp, gz=path.suffix == ".gz"))
    if not kernel_times:
        return {}
    times = match_kernel_times([r["kernel"] for r in rows], kernel_records(read_json(path)))
    for row, t in zip(rows, times, strict=True):
        row["measured_us"] = t
    return {"timer": "torch.profiler kernel records (CUPTI)",
            "unmatched_rows": sum(t is None for t in times)}
