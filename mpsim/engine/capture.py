"""Live trace capture: run a generation on the engine with a recorder open, return the trace.

Every kernel launch becomes a trace row with its grid, config, analytic bytes and measured time
(CUDA events on a GPU; host wall time under the Triton interpreter, and the `device` column says
which). A short warm-up generation runs first, unrecorded, so JIT compilation is not measured.
"""

from __future__ import annotations

import contextlib
import platform
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


def capture(spec: ModelSpec, policy: Policy, workload: Workload, *, weights: str | Path | None = None,
            seed: int = 0, profile: str | Path | None = None) -> Trace:
    """Generate with the Triton backend under `policy` and record every launch.

    `weights` is an HF-style folder; None means random weights at the real shapes (--dummy), with
    random quantized codes (no k-means) so large models load quickly. `profile` also writes a
    torch.profiler trace whose mpsim ranges `mpsim.traces.kineto.import_kineto` reads back.
    """
    from mpsim.kernels.runtime import on_gpu

    params = load_hf_weights(weights, spec) if weights is not None else dummy_weights(spec, seed)
    backend = make_backend("triton")
    decoder = Decoder(params, policy, backend, dummy_seed=None if weights is not None else seed)
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, spec.vocab, size=(workload.batch, workload.prompt_len)).tolist()
    generate(decoder, [p[: min(8, len(p))] for p in prompts], 2, FixedScheduler(policy))  # warm-up
    gpu = on_gpu()
    profiler = contextlib.nullcontext() if profile is None else torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU]
        + ([torch.profiler.ProfilerActivity.CUDA] if gpu else []))
    with profiler as prof, Recorder(use_cuda_events=gpu, device_name=environment("triton", gpu)["device"],
                                    annotate=profile is not None) as rec:
        generate(decoder, prompts, workload.gen_len, FixedScheduler(policy))
    if prof is not None:
        prof.export_chrome_trace(str(profile))
    rows = rec.finish()
    meta = TraceMeta("capture", spec.as_dict(), policy.spelling, workload.as_dict(),
                     environment("triton", gpu) | {"weights": str(weights) if weights else "dummy"})
    return Trace.from_rows(rows, meta)
