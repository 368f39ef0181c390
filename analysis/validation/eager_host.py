"""Host time of an eager framework call, for rows timed without a CUDA graph (protocol `eager`).

Timed eagerly (CUDA events around N back-to-back calls, aiconfigurator collector/helper.py
benchmark_with_power with use_cuda_graph False), a call takes the longer of its host path (Python
dispatch, the framework's checks, the launches) and its GPU time: the host runs ahead while the GPU
is the bottleneck, the GPU idles while the host is. Where the host time of a framework path is
known, validation predicts

    max(host_us, sum of the kernel bodies + the graph protocol's per-launch gaps)

and otherwise the eager protocol's additive cost (mpsim/sim/protocols.yaml).

HOST_US, by (collector host, framework, kernel_source): the median measured time of the rows whose
GPU work is negligible (n, k <= 512). The host is the machine the collector ran on, not the GPU's
physics, so each GPU's tables have their own (`HOSTS` maps a hardware file to its collector's host):
- `hopper`: fitted on H200 vLLM 0.24.0 fp8_block rows (FlashInfer 204 rows, DeepGEMM 684, CUTLASS
  962); H100's rows, not fitted, give 59.4 / 90.8 / 178.1 us, so H100 shares it;
- `b200`: fitted on B200 vLLM 0.24.0 fp8_block rows (DeepGEMM 888, CUTLASS 962), in sample: no
  other table was collected on that host. Its host time drifts in blocks of the collection order
  (DeepGEMM ~175 us in some, ~235 us in others, whatever the shape), so a single value leaves about
  +-15% of noise that no GPU model can explain.
- `l40s`: fitted on L40S vLLM 0.24.0 fp8_block rows (TritonFp8BlockScaledMMKernel, 1850 rows; median
  345.0 us, 10th-90th percentile 304-371 us, the same in every M band), in sample as for B200: a
  Triton launch from Python plus the group quantization.
A hardware file with no entry in `HOSTS` has no host floor: its eager rows are priced with the eager
protocol's additive cost (mpsim/sim/protocols.yaml), as every eager row of an unknown host path is.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

HOST_US: dict[tuple[str, str, str], float] = {
    ("hopper", "vllm", "FlashInferFp8BlockScaledMMKernel"): 58.7,
    ("hopper", "vllm", "DeepGemmFp8BlockScaledMMKernel"): 88.4,
    ("hopper", "vllm", "CutlassFp8BlockScaledMMKernel"): 176.4,
    ("b200", "vllm", "DeepGemmFp8BlockScaledMMKernel"): 180.3,
    ("b200", "vllm", "CutlassFp8BlockScaledMMKernel"): 165.9,
    ("l40s", "vllm", "TritonFp8BlockScaledMMKernel"): 345.0,
}
HOSTS: dict[str, str] = {"h200-sxm": "hopper", "h100-sxm": "hopper", "b200-sxm": "b200", "l40s": "l40s"}


def host_floor_us(rows: pd.DataFrame, hw_name: str) -> np.ndarray:
    """Per measured row on hardware file `hw_name`: its eager call's host time (NaN where unknown or
    not an eager row)."""
    out = np.full(len(rows), np.nan)
    host = HOSTS.get(hw_name)
    if host is None or "kernel_source" not in rows or "framework" not in rows:
        return out
    eager = (rows["protocol"].astype(str) == "eager").to_numpy()
    keys = zip(rows["framework"].astype(str).str.lower(), rows["kernel_source"].astype(str), strict=True)
    for i, (fw, source) in enumerate(keys):
        if eager[i] and (host, fw, source) in HOST_US:
            out[i] = HOST_US[(host, fw, source)]
    return out
