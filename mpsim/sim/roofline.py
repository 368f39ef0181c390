"""The roofline baseline: each launch takes max(t_math, t_mem) and nothing else.

t_math = FLOPs / peak (tensor cores or MAC array for GEMM and attention, CUDA cores or the vector
unit for everything else); t_mem = DRAM bytes / peak DRAM bandwidth; t_lower = max(t_math, t_mem).
It is the lower bound every simulated time is checked against, and a selectable performance model.
`roofline` computes it for a whole trace (vectorized), `launch_roofline` for one launch in plain
Python (`mpsim op`, which starts without numpy and pandas); tests/sim/test_roofline.py holds the
two equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.hw_models.schema import HardwareSpec

if TYPE_CHECKING:
    import pandas as pd

MATRIX_OPS = ("gemm", "attention")
BOUNDS = ("math", "memory")


def roofline(rows: pd.DataFrame, hw: HardwareSpec, matrix_dtype: str = "fp16") -> pd.DataFrame:
    """Per-launch t_math, t_mem, t_lower (seconds) and the bounding resource."""
    # numpy and pandas load here, not at the top: `mpsim op` imports this module for launch_roofline
    import numpy as np
    import pandas as pd

    flops, nbytes, t_math, t_mem, t_lower = roofline_terms(rows, hw, matrix_dtype)
    return pd.DataFrame({
        "launch_id": rows["launch_id"].to_numpy(),
        "t_math_s": t_math,
        "t_mem_s": t_mem,
        "t_lower_s": t_lower,
        # two names over ~10^6 launches: a categorical, not a million strings
        "bound": pd.Categorical.from_codes((t_math < t_mem).astype(np.int8), categories=BOUNDS),
        "arithmetic_intensity": np.divide(flops, nbytes, out=np.zeros_like(flops), where=nbytes > 0),
    })


def roofline_terms(rows: pd.DataFrame, hw: HardwareSpec, matrix_dtype: str = "fp16") -> tuple[Any, ...]:
    """The arrays behind `roofline`: (FLOPs, bytes, t_math, t_mem, t_lower), one entry per launch
    (no DataFrame: the replay keeps only what its timeline needs)."""
    import numpy as np  # see roofline

    flops = rows["flops"].to_numpy(dtype=float)
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    is_matrix = rows["op"].isin(MATRIX_OPS).to_numpy(dtype=bool)
    peak = np.where(is_matrix, hw.matrix_peak_flops(matrix_dtype), hw.vector_peak_flops())
    t_math = flops / peak
    t_mem = nbytes / hw.dram_bandwidth_Bps()
    return flops, nbytes, t_math, t_mem, np.maximum(t_math, t_mem)


def launch_roofline(row: Mapping[str, Any], hw: HardwareSpec, matrix_dtype: str = "fp16") -> dict[str, Any]:
    """`roofline` of one launch (a trace-row mapping): t_math_s, t_mem_s, t_lower_s, bound."""
    flops = float(row["flops"])
    nbytes = float(row["bytes_read"] + row["bytes_written"])
    peak = hw.matrix_peak_flops(matrix_dtype) if row["op"] in MATRIX_OPS else hw.vector_peak_flops()
    t_math, t_mem = flops / peak, nbytes / hw.dram_bandwidth_Bps()
    return {"t_math_s": t_math, "t_mem_s": t_mem, "t_lower_s": max(t_math, t_mem),
            "bound": "math" if t_math >= t_mem else "memory"}
