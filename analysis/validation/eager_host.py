"""Host time of an eager framework call, for rows timed without a CUDA graph (protocol `eager`).

Timed eagerly (CUDA events around N back-to-back calls, aiconfigurator collector/helper.py
benchmark_with_power with use_cuda_graph False), a call takes the longer of its host path (Python
dispatch, the framework's checks, the launches) and its GPU time: the host runs ahead while the GPU
is the bottleneck, the GPU idles while the host is. Where the host time of a framework path is
known, validation predicts

    max(host_us, sum of the kernel bodies + the graph protocol's per-launch gaps)

and otherwise the eager protocol's additive cost (mpsim/sim/protocols.yaml).

HOST_US, by (framework, kernel_source): the median measured time of the rows whose GPU work is
negligible (n, k <= 512), fitted on H200 vLLM 0.24.0 fp8_block rows (FlashInfer 204 rows, DeepGEMM
684, CUTLASS 962); H100's rows, not fitted, give 59.4 / 90.8 / 178.1 us. (B200's host differs:
DeepGEMM 180 us, CUTLASS 166 us; the B200 rows are outside the fitted stacks.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

HOST_US: dict[tuple[str, str], float] = {
    ("vllm", "FlashInferFp8BlockScaledMMKernel"): 58.7,
    ("vllm", "DeepGemmFp8BlockScaledMMKernel"): 88.4,
    ("vllm", "CutlassFp8BlockScaledMMKernel"): 176.4,
}


def host_floor_us(rows: pd.DataFrame) -> np.ndarray:
    """Per measured row: its eager call's host time (NaN where unknown or not an eager row)."""
    out = np.full(len(rows), np.nan)
    if "kernel_source" not in rows or "framework" not in rows:
        return out
    eager = (rows["protocol"].astype(str) == "eager").to_numpy()
    keys = zip(rows["framework"].astype(str).str.lower(), rows["kernel_source"].astype(str), strict=True)
    for i, key in enumerate(keys):
        if eager[i] and key in HOST_US:
            out[i] = HOST_US[key]
    return out
