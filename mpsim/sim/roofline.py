"""The roofline baseline: each launch takes max(t_math, t_mem) and nothing else.

t_math = FLOPs / peak (tensor cores or MAC array for GEMM and attention, CUDA cores or the vector
unit for everything else); t_mem = DRAM bytes / peak DRAM bandwidth; t_lower = max(t_math, t_mem).
As a performance model (`roofline(rows, hw)`) every analytic byte goes to DRAM.

As the bound of the simulators (`roofline(rows, hw, resident=True)`), t_mem counts only the DRAM bytes
a launch must move: on a GPU, the activation input the previous launch just wrote is in L2 up to the
L2's size (a launch reads at most min(what its predecessor wrote, L2, its own first input) from L2),
and a launch replayed back to back (`l2_warm` in its config: a benchmark in a CUDA graph, or an add
whose second input the previous kernel just wrote) may find up to an L2's worth of its reads there.
A launch timed once from idle (`one_run`: TensorRT's per-layer profiler) ends with up to an L2 of
its output still dirty in the write-back L2, which it never writes to DRAM while timed. The credit
uses the whole L2, more than any simulator credits, so the bound stays a bound; a simulated time
below it is an error (mpsim/sim/replay.py).

`roofline`/`roofline_terms` work on a whole trace (vectorized), `launch_roofline` on one launch in
plain Python (`mpsim op`, which starts without numpy and pandas); tests/sim/test_roofline.py holds
them equal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.library import SCALED_GEMM_KERNELS
from mpsim.traces.accounting import FP16
from mpsim.traces.schema import COLLECTIVE_OPS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

MATRIX_OPS = ("gemm", "attention")
BOUNDS = ("math", "memory", "comm")  # comm: a collective row's link time (mpsim/sim/comm.py)
WARM_KERNELS = ("fa3_decode", "torch_add", "sglang_fa3_decode", "trtllm_xqa_decode",
                "trtllm_mmha_decode", "fa2_decode", "flashinfer_decode", "flashinfer_trtllm_decode",
                "fa2_prefill", "flashinfer_prefill", "flashinfer_trtllm_prefill", "vllm_triton_decode")
# kernels whose config can say a measurement cycled copies of their weights (`w_copies` > 0, a replay:
# analysis/validation/weight_copies.py); the bound treats them as warm (up to an L2 of their reads)
# (and the fp8 / fp4 scaled GEMMs, mpsim.library.SCALED_GEMM_KERNELS, whose rows say it alike)
REPLAY_KERNELS = ("cublas_gemm", *SCALED_GEMM_KERNELS)
# kernels whose config can say their matrix work runs at the fp8 tensor rate (`fp8`: 1)
FP8_MATRIX_KERNELS = ("trtllm_context_fmha", "trtllm_sm89_context_fmha", "flashinfer_trtllm_decode",
                      "flashinfer_trtllm_prefill",
                      "fa3_decode", "fa3_prefill", "sglang_fa3_decode", "sglang_fa3_prefill",
                      "vllm_triton_decode", "vllm_triton_prefill")
# a GEMM's quantized activations (a_dtype) name the tensor rate it runs at
A_DTYPE_PEAK = {"fp8-e4m3": "fp8", "fp4-e2m1": "fp4"}


def roofline(rows: pd.DataFrame, hw: HardwareSpec, matrix_dtype: str = "fp16",
             resident: bool = False) -> pd.DataFrame:
    """Per-launch t_math, t_mem, t_lower (seconds) and the bounding resource; `resident`: the bound
    of the simulators (t_mem after L2 residency, GPUs only)."""
    # numpy and pandas load here, not at the top: `mpsim op` imports this module for launch_roofline
    import numpy as np
    import pandas as pd

    flops, nbytes, t_math, t_mem, t_lower = roofline_terms(rows, hw, matrix_dtype, resident)
    codes = (t_math < t_mem).astype(np.int8)
    if rows["op"].isin(COLLECTIVE_OPS).any():  # a collective bound by its link
        codes[(t_lower > np.maximum(t_math, t_mem))] = 2
    return pd.DataFrame({
        "launch_id": rows["launch_id"].to_numpy(),
        "t_math_s": t_math,
        "t_mem_s": t_mem,
        "t_lower_s": t_lower,
        # two names over ~10^6 launches: a categorical, not a million strings
        "bound": pd.Categorical.from_codes(codes, categories=BOUNDS),
        "arithmetic_intensity": np.divide(flops, nbytes, out=np.zeros_like(flops), where=nbytes > 0),
    })


def roofline_terms(rows: pd.DataFrame, hw: HardwareSpec, matrix_dtype: str = "fp16",
                   resident: bool = False, keyed: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[Any, ...]:
    """The arrays behind `roofline`: (FLOPs, bytes, t_math, t_mem, t_lower), one entry per launch
    (no DataFrame: the replay keeps only what its timeline needs). `keyed` = (first row of each
    distinct launch, code per row), the replay's launch keys: what depends on a launch's own shape
    is computed once per distinct launch."""
    import numpy as np  # see roofline

    flops = rows["flops"].to_numpy(dtype=float)
    nbytes = (rows["bytes_read"] + rows["bytes_written"]).to_numpy(dtype=float)
    if resident and isinstance(hw, GpuSpec):
        nbytes -= resident_credit(rows, hw.l2.size_MiB * 2**20, keyed)
    is_matrix = rows["op"].isin(MATRIX_OPS).to_numpy(dtype=bool)
    peak = np.where(is_matrix, hw.matrix_peak_flops(matrix_dtype), hw.vector_peak_flops())
    fp8 = _config_flag(rows, FP8_MATRIX_KERNELS, "fp8") & is_matrix
    if fp8.any():
        peak = np.where(fp8, hw.matrix_peak_flops("fp8"), peak)
    if "a_dtype" in rows:
        for name, dtype in A_DTYPE_PEAK.items():
            at = rows["a_dtype"].eq(name).to_numpy(dtype=bool, na_value=False) & is_matrix
            if at.any():  # a device without that tensor rate: UnsupportedDtypeError
                peak = np.where(at, hw.matrix_peak_flops(dtype), peak)
    t_math = flops / peak
    t_mem = nbytes / hw.dram_bandwidth_Bps()
    t_lower = np.maximum(t_math, t_mem)
    if rows["op"].isin(COLLECTIVE_OPS).any():  # collectives: their link time (plain bound or, as the
        from mpsim.sim.comm import link_seconds  # simulators' bound, the link time alone)

        t_lower = np.maximum(t_lower, link_seconds(rows, hw, plain=not resident))
    return flops, nbytes, t_math, t_mem, t_lower


def input_bytes(rows: pd.DataFrame) -> np.ndarray:
    """Bytes of the activation each launch reads first (what its predecessor produced), per row."""
    import numpy as np  # see roofline

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
    return _config_flag(rows, WARM_KERNELS, "l2_warm")


def replay_rows(rows: pd.DataFrame) -> np.ndarray:
    """Rows whose config says a measurement cycled copies of their weights (`w_copies` > 0)."""
    return _config_flag(rows, REPLAY_KERNELS, "w_copies")


def _config_flag(rows: pd.DataFrame, kernels: tuple[str, ...], key: str) -> np.ndarray:
    """Rows of `kernels` whose config sets `key` to a nonzero value."""
    import numpy as np  # see roofline

    candidates = rows["kernel"].isin(kernels).to_numpy(dtype=bool, na_value=False)
    out = np.zeros(len(rows), dtype=bool)
    if candidates.any():
        configs = rows.loc[candidates, "config"].astype(str)
        flag = {c: _flag(c, key) for c in configs.unique()}
        out[candidates] = configs.map(flag).to_numpy(dtype=bool)
    return out


def one_run_rows(rows: pd.DataFrame) -> np.ndarray:
    """Rows whose config says they were timed once from idle (`one_run`: 1), of any kernel."""
    configs = rows["config"].astype(str)
    maybe = configs.str.contains('"one_run"', regex=False).to_numpy(dtype=bool)
    out = maybe.copy()
    if maybe.any():
        flag = {c: _flag(c, "one_run") for c in configs[maybe].unique()}
        out[maybe] = configs[maybe].map(flag).to_numpy(dtype=bool)
    return out


def _flag(config: str, key: str) -> bool:
    return bool(json.loads(config).get(key, 0))


def is_warm(config: str) -> bool:
    return _flag(config, "l2_warm")


def resident_credit(rows: pd.DataFrame, l2_bytes: float,
                    keyed: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """DRAM bytes each launch may find in an L2 of `l2_bytes` instead of DRAM (see the module doc);
    `keyed`: as in roofline_terms (a launch's input bytes and warmth follow from its key columns)."""
    import numpy as np  # see roofline

    if keyed is None:
        inputs, warm, replay = input_bytes(rows), warm_rows(rows), replay_rows(rows)
        once = one_run_rows(rows)
    else:
        first, codes = keyed
        reps = rows.iloc[first]
        inputs, warm, replay = input_bytes(reps)[codes], warm_rows(reps)[codes], replay_rows(reps)[codes]
        once = one_run_rows(reps)[codes]
    written = rows["bytes_written"].to_numpy(dtype=float)
    read = rows["bytes_read"].to_numpy(dtype=float)
    credit = np.concatenate([[0.0], written[:-1]])
    np.minimum(credit, l2_bytes, out=credit)  # what the previous launch left, up to the L2
    np.minimum(credit, inputs, out=credit)  # of what this launch reads first
    # a warm launch may find up to a whole L2 of what it reads there (all of it when it fits)
    credit = np.where(warm, np.maximum(credit, np.minimum(read, l2_bytes)), credit)
    # a replayed launch may also keep its output there (up to an L2 of its reads and writes)
    credit = np.where(replay, np.maximum(credit, np.minimum(read + written, l2_bytes)), credit)
    # a launch timed once ends with up to an L2 of its output unwritten (never more than it moves)
    return np.minimum(np.where(once, credit + np.minimum(written, l2_bytes), credit), read + written)


def launch_roofline(row: Mapping[str, Any], hw: HardwareSpec, matrix_dtype: str = "fp16",
                    resident: bool = False) -> dict[str, Any]:
    """`roofline` of one launch alone (a trace-row mapping, nothing before it): t_math_s, t_mem_s,
    t_lower_s, bound. `resident`: the simulators' bound (a back-to-back replayed launch whose input
    fits the L2 finds it there)."""
    flops = float(row["flops"])
    read = float(row["bytes_read"])
    nbytes = read + float(row["bytes_written"])
    warm = row["kernel"] in WARM_KERNELS and is_warm(str(row["config"]))
    if resident and isinstance(hw, GpuSpec) and warm:
        nbytes -= min(read, hw.l2.size_MiB * 2**20)  # up to an L2 of its reads (resident_credit)
    elif resident and isinstance(hw, GpuSpec) and row["kernel"] in REPLAY_KERNELS and _flag(
            str(row["config"]), "w_copies"):
        nbytes -= min(nbytes, hw.l2.size_MiB * 2**20)  # and of its writes (resident_credit)
    if resident and isinstance(hw, GpuSpec) and _flag(str(row["config"]), "one_run"):
        nbytes = max(0.0, nbytes - min(float(row["bytes_written"]), hw.l2.size_MiB * 2**20))
    peak = hw.matrix_peak_flops(matrix_dtype) if row["op"] in MATRIX_OPS else hw.vector_peak_flops()
    if row["op"] in MATRIX_OPS and row["kernel"] in FP8_MATRIX_KERNELS and _flag(str(row["config"]), "fp8"):
        peak = hw.matrix_peak_flops("fp8")
    if row["op"] in MATRIX_OPS and str(row.get("a_dtype")) in A_DTYPE_PEAK:
        peak = hw.matrix_peak_flops(A_DTYPE_PEAK[str(row.get("a_dtype"))])
    t_math, t_mem = flops / peak, nbytes / hw.dram_bandwidth_Bps()
    if row["op"] in COLLECTIVE_OPS:
        from mpsim.sim.comm import link_seconds_row

        t_link = link_seconds_row(row, hw, plain=not resident)
        if t_link > max(t_math, t_mem):
            return {"t_math_s": t_math, "t_mem_s": t_mem, "t_lower_s": t_link, "bound": "comm"}
    return {"t_math_s": t_math, "t_mem_s": t_mem, "t_lower_s": max(t_math, t_mem),
            "bound": "math" if t_math >= t_mem else "memory"}
