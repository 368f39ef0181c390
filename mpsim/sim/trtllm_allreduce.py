"""TensorRT-LLM's all-reduce strategy under AllReduceStrategy.AUTO: its lookup table of measured
winners, its workspace limit, and its NCCL fallbacks (facts, transcribed; the costs are in
collectives.py).

Read in NVIDIA/TensorRT-LLM @005b299b (the code index's copy; the collector's 1.3.0rc20 tag was not
fetched, so the table of that exact release is not pinned):
- cpp/tensorrt_llm/thop/allreduceOp.cpp `AllreduceOp::selectImplementation`: NCCL when the message is
  larger than `getMaxRequiredWorkspaceSize(tp)` or the GPUs have no peer-to-peer NVLink
  (`ifFallbackToNCCL`); otherwise, for AUTO, `selectStrategyLookUpTable(seq_len, hidden, op, tp)`.
  `runFusionAllReduce` runs the one-shot kernel for ONESHOT and the two-shot kernel for TWOSHOT
  whatever the token count (kOneShotMaxToken = 128 applies only to the MIN_LATENCY strategy).
- cpp/tensorrt_llm/common/customAllReduceUtils.h: the workspace, 16,000,000 bytes on up to two GPUs
  and 8,000,000 above; the table AllReduceBestStrategyTable[sm][tp][fusion][hidden][tokens] for
  sm 90 (every sm below 100) and 100 (every sm from 100), tp 2/4/8, hidden 128..8192 and tokens
  1..16384 by powers of two (index floor(log2)); values NCCL 0, ONESHOT 4, TWOSHOT 5; an index out
  of the table falls back to NCCL (symmetric). Only the fusion NONE rows are transcribed: mpsim prices
  the residual add and RMSNorm as their own launches.
The table holds NVIDIA's measured winners between the two custom kernels; its entries for few
tokens flip between ONESHOT and TWOSHOT from one size to the next (near ties when it was measured),
so collectives.py prices a custom entry as the faster of the two kernels and uses the table to
decide custom or NCCL.
"""

from __future__ import annotations

import math
from typing import Literal

Strategy = Literal["nccl", "oneshot", "twoshot"]
_CODE: dict[int, Strategy] = {0: "nccl", 4: "oneshot", 5: "twoshot"}
HIDDEN_MIN_LOG2 = 7  # the table's first hidden size, 128

# [tp 2, 4, 8][hidden 128 .. 8192][tokens 1 .. 16384], fusion NONE
_SM90 = (
    ((4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 4, 5, 4, 4, 4, 4, 4, 4, 0, 0),
     (4, 4, 5, 4, 4, 5, 5, 5, 4, 5, 4, 4, 4, 0, 0), (4, 4, 4, 4, 5, 4, 5, 4, 4, 4, 4, 4, 0, 0, 0),
     (4, 4, 4, 4, 4, 5, 5, 5, 5, 4, 4, 5, 0, 0, 0), (4, 5, 4, 5, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0),
     (4, 4, 5, 5, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0)),
    ((4, 4, 4, 4, 5, 4, 4, 5, 4, 5, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 4, 0, 0, 0, 0),
     (4, 4, 4, 4, 5, 4, 5, 5, 5, 4, 4, 5, 0, 0, 0), (4, 4, 4, 4, 4, 5, 5, 4, 5, 4, 5, 5, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 5, 4, 5, 5, 0, 0, 0, 0), (4, 4, 4, 5, 5, 5, 5, 4, 5, 5, 0, 0, 0, 0, 0),
     (4, 4, 4, 4, 4, 5, 4, 5, 5, 0, 0, 0, 0, 0, 0)),
    ((4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 0, 0, 0, 0), (4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 0, 0, 0, 0, 0),
     (4, 4, 4, 4, 4, 5, 5, 5, 5, 0, 0, 0, 0, 0, 0)),
)
_SM100 = (
    ((4, 4, 4, 4, 4, 4, 4, 4, 5, 4, 4, 4, 0, 0, 0), (4, 4, 4, 4, 5, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0),
     (4, 4, 4, 5, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0), (4, 4, 4, 5, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0),
     (4, 4, 5, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0)),
    ((4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 0, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 0, 0, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 5, 0, 0, 0, 0, 0, 0)),
    ((4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 0, 0, 0, 0), (4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 0, 0, 0, 0, 0),
     (4, 4, 4, 4, 4, 4, 4, 5, 5, 0, 0, 0, 0, 0, 0)),
)


def workspace_bytes(tp: int) -> int:
    """getMaxRequiredWorkspaceSize: the largest message the custom kernels take."""
    return 16_000_000 if tp <= 2 else 8_000_000


def strategy(tokens: int, hidden: int, tp: int, nbytes: float, blackwell: bool,
             nvlink: bool = True) -> Strategy:
    """What AUTO runs for a [tokens, hidden] all-reduce of `nbytes` on `tp` GPUs."""
    if tokens < 1 or hidden < 1:
        raise ValueError(f"all-reduce of [{tokens}, {hidden}]: need tokens >= 1 and hidden >= 1")
    if nbytes > workspace_bytes(tp) or not nvlink:
        return "nccl"
    table = _SM100 if blackwell else _SM90
    t = int(math.log2(tp)) - 1
    h = int(math.log2(hidden)) - HIDDEN_MIN_LOG2
    k = int(math.log2(tokens))
    if not (0 <= t < len(table) and 0 <= h < len(table[t]) and k < len(table[t][h])):
        return "nccl"  # out of the table: NCCL (symmetric)
    return _CODE[table[t][h][k]]
