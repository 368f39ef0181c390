"""How many copies of a GEMM's weights an aiconfigurator collector cycles through per timed call, per
row (framework, version, dtype, shape, and the device's L2 and memory), read from the collectors'
source in github:ai-dynamo/aiconfigurator.

A collector builds `c` Linear layers with distinct weights of the same shape and times a loop
calling each once, reporting the loop's time / c. A copy's weights are therefore re-read after the
other c - 1 copies were: they can still be in L2 (the weights are "replayed" from L2), which the
simulator prices as a per-launch residency (mpsim/sim/gpu/memory.py `replayed_weight_bytes`),
carried in the launch config as `w_copies` (0: not a replay, the weights come from DRAM).

Rules, by collector:
- TRT-LLM before 1.3 (the L40S 1.0.0 table, added in commit 3de8825f2c78 on 2025-11-07, and the
  H200 1.2.0rc5 table, commit 13669a1727e7 on 2025-12-22): collector/trtllm/collect_gemm.py at
  3de8825f2c78 `repeat_n = 5  # to reduce impact of L2 cache hit` (renamed outside_loop_count in
  d1fe22a678c9, still 5): 5 copies for every dtype and shape.
- TRT-LLM 1.3.0rc20 (collector/trtllm/collect_gemm.py at dec5f4cd21b7, `__compat__ =
  "trtllm>=1.3.0rc20"`): `outside_loop_count = max(1, min(5, ceil(l2_bytes / weight_bytes)))`
  with the device's reported L2 (cudaDevAttrL2CacheSize) and the weight bytes of the dtype.
- vLLM 0.24.0 (collector/vllm/collect_gemm.py at d5bad971c957): `outside_loop_count = 1 if
  gemm_type in ("fp8_block", "nvfp4") else 6`.
- SGLang 0.5.14 (collector/sglang/collect_gemm.py at e23be5a79438): with persistent bytes
  M K 2 + M N 2 + N K 2 (bf16) and a budget of 0.45 of the device memory,
  `max(1, min(6, budget // persistent))` (1 when persistent >= budget). The device memory is the
  hardware file's DRAM size (the device reports slightly less: an assumption, it only matters for
  shapes near the budget, none in the selections).
"""

from __future__ import annotations

import math

from mpsim.errors import MpsimInputError

# bytes per weight element of the collectors' gemm_dtype (trtllm collect_gemm.py `_bytes_per_elem`)
WEIGHT_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}


def _version(text: str) -> tuple[int, int]:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise MpsimInputError(f"weight copies: framework version {text!r} is not MAJOR.MINOR...") from None


def weight_copies(framework: str, version: str, dtype: str, m: int, n: int, k: int,
                  l2_bytes: float, dram_bytes: float) -> int:
    """Copies of the weights the collector of (framework, version) cycled for one row (0: unknown
    collector, the weights are priced as streamed from DRAM)."""
    fw = framework.lower()
    if dtype not in WEIGHT_BYTES:
        return 0
    if fw == "trtllm":
        if _version(version) < (1, 3):
            return 5
        return max(1, min(5, math.ceil(l2_bytes / (n * k * WEIGHT_BYTES[dtype]))))
    if fw == "vllm" and version == "0.24.0":
        return 1 if dtype in ("fp8_block", "nvfp4") else 6
    if fw == "sglang" and version == "0.5.14" and dtype == "bfloat16":
        persistent = 2 * (m * k + m * n + n * k)
        budget = int(dram_bytes * 0.45)
        return 1 if persistent >= budget else max(1, min(6, budget // persistent))
    return 0
