"""The roofline baseline, and the residency-aware lower bound every simulated launch is checked against.

t_math = FLOPs / peak (tensor cores or MAC array for GEMM and attention, CUDA cores or the vector
unit for everything else); t_mem = DRAM bytes / peak DRAM bandwidth; t_lower = max(t_math, t_mem).
As a performance model (`roofline(rows, hw)`) every analytic byte goes to DRAM.

As the bound of the simulators (`roofline(rows, hw, resident=True)`), t_mem counts only the DRAM bytes
a launch must move: on a GPU, the activation input the previous launch just wrote is in L2 up to the
L2's size (a launch reads at most min(what its predecessor wrote, L2, its own first input) from L2),
and a launch replayed back to back (`l2_warm` in its config: a benchmark in a CUDA graph, or an add
whose second input the previous kernel just wrote) may find
up to an L2's worth of its reads there. The credit uses the whole L2, more than any simulator
credits, so the bound stays a bound; a simulated time below it is an error (mpsim/sim/replay.py).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.traces.accounting import FP16

MATRIX_OPS = ("gemm", "attention")
WARM_KERNELS = ("fa3_decode", "torch_add")


def input_bytes(rows: pd.DataFrame) -> np.ndarray:
    """Bytes of the activation each launch reads first (what its predecessor produced), per row."""
    def col(name: str) -> np.ndarray:
        if name not in rows:
            return np.zeros(len(rows))
        return rows[name].to_numpy(dtype=float, na_value=0.0)

    def is_(name: str, value: str) -> np.ndarray:
        return rows[name].eq(value).to_numpy(dtype=bool, na_value=False)

    m, n, k = col("m"), col("n"), col("k")
    q_bytes = col("batch") * col("q_len") * col("num_q_heads") * col("head_dim") * FP16
    kv_new = col("batch") * col("q_len") * col("num_kv_heads") * col("head_dim") * 2 * FP16
    width = np.where(is_("op", "act") & (k > 0), k, n)
    out = np.select(
        [is_("op", "gemm"), is_("op", "attention"), is_("op", "kv_quant"), is_("op", "embed"),
         is_("op", "sample"), is_("kernel", "torch_add")],
        [m * k * FP16, q_bytes, kv_new, np.zeros(len(rows)), col("bytes_read"), 2 * m * n * FP16],
        default=m * width * FP16)
    return np.asarray(out, dtype=float)


def warm_rows(rows: pd.DataFrame) -> np.ndarray:
    """Rows whose config says they replay back to back (`l2_warm`: 1)."""
    candidates = rows["kernel"].isin(WARM_KERNELS).to_numpy(dtype=bool, na_value=False)
    out = np.zeros(len(rows), dtype=bool)
    if candidates.any():
        configs = rows.loc[candidates, "config"].astype(str)
        warm = {c: bool(json.loads(c).get("l2_warm", 0)) for c in configs.unique()}
        out[candidates] = configs.map(warm).to_numpy(dtype=bool)
    return out


def resident_credit(rows: pd.DataFrame, l2_bytes: float) -> np.ndarray:
    """DRAM bytes each launch may find in an L2 of `l2_bytes` instead of DRAM (see the module doc)."""
    written = rows["bytes_written"].to_numpy(dtype=float)
    read = rows["bytes_read"].to_numpy(dtype=float)
    prev = np.minimum(np.concatenate([[0.0], written[:-1]]), l2_bytes)
    credit = np.minimum(prev, input_bytes(rows))
    # a warm launch may find up to a whole L2 of what it reads there (all of it when it fits)
    return np.where(warm_rows(rows), np.maximum(credit, np.minimum(read, l2_bytes)), credit)


def roofline(rows: pd.DataFrame, hw: HardwareSpec, matrix_dtype: str = "fp16",
             resident: bool = False) -> pd.DataFrame:
    """Per-launch t_math, t_mem, t_lower (seconds) and the bounding resource; `resident`: the bound
    of the simulators (t_mem after L2 residency, GPUs only)."""
    flops = rows["flops"].to_numpy(dtype=float)
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    if resident and isinstance(hw, GpuSpec):
        nbytes = nbytes - resident_credit(rows, hw.l2.size_MiB * 2**20)
    is_matrix = rows["op"].isin(MATRIX_OPS).to_numpy(dtype=bool)
    peak = np.where(is_matrix, hw.matrix_peak_flops(matrix_dtype), hw.vector_peak_flops())
    t_math = flops / peak
    t_mem = nbytes / hw.dram_bandwidth_Bps()
    t_lower = np.maximum(t_math, t_mem)
    return pd.DataFrame({
        "launch_id": rows["launch_id"].to_numpy(),
        "t_math_s": t_math,
        "t_mem_s": t_mem,
        "t_lower_s": t_lower,
        "bound": pd.Categorical.from_codes((t_math < t_mem).astype(np.int8),
                                           categories=["math", "memory"]),
        "arithmetic_intensity": np.divide(flops, nbytes, out=np.zeros_like(flops), where=nbytes > 0),
    })
