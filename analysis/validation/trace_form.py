"""`mpsim validate TRACE`: a captured trace's measured launches against both performance models.

Every launch is one measured call. Under the trace's protocol (metadata `protocol`, or a capture's
environment["protocol"]) each launch pays that protocol's fixed cost, applied by `simulate`; a trace
that names none is predicted under the simulator's default (`graph`). The rows file holds every
trace column, then the same OUT_COLUMNS as the --against form; the summary is per op class and M band.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.against import MODELS, OUT_COLUMNS
from mpsim.analysis.validation.measured import attention_class, band_of, gemm_class
from mpsim.analysis.validation.metrics import status_counts, summary_table
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim import DEFAULT_CACHE, simulate
from mpsim.sim.protocols import DEFAULT_PROTOCOL
from mpsim.traces.trace import Trace

CLASS_BY_KERNEL = {"rms_norm_kernel": "rmsnorm", "layer_norm_kernel": "layernorm",
                   "silu_mul_kernel": "silu_mul", "gelu_kernel": "gelu",
                   "residual_add_kernel": "add", "rope_kernel": "rope", "kv_quant_kernel": "kv_append",
                   "embedding_kernel": "embed", "argmax_kernel": "sample"}


@dataclass
class TraceValidation:
    frame: pd.DataFrame       # trace rows + cls, band, measured and the prediction columns
    summary: pd.DataFrame
    unpredicted: pd.DataFrame
    protocol: str | None

    @property
    def rows_table(self) -> pd.DataFrame:
        cols = [c for c in self.frame.columns if c not in ("cls", "band", *OUT_COLUMNS)]
        return self.frame[[*cols, *OUT_COLUMNS]]


def interpreter_note(rows: pd.DataFrame, hw_name: str) -> str | None:
    """A note when the measured times come from a CPU (the Triton interpreter), not from a GPU like
    `hw_name`: such times are host time, not what a GPU model predicts or can be fitted to."""
    if "device" not in rows.columns:
        return None
    devices = sorted(set(rows["device"].dropna().astype(str)))
    if any("interpreter" in d or d.startswith("cpu") for d in devices):
        return (f"the measured times come from {devices}, not from {hw_name}: a CPU interpreter's "
                "host time, not a GPU's kernel time")
    return None


def launch_class(row: dict[str, object]) -> str:
    op = str(row["op"])
    if op == "gemm":
        group = row.get("group_size")
        return gemm_class(str(row["w_format"]), int(str(row["w_bits"])),
                          None if group is None else int(str(group)), int(str(row["k"])))
    if op == "attention":
        return attention_class(int(str(row["q_len"])), int(str(row["k_bits"])))
    return CLASS_BY_KERNEL.get(str(row["kernel"]), op)


def _classes(rows: pd.DataFrame) -> np.ndarray:
    cols = ["op", "kernel", "w_format", "w_bits", "group_size", "k", "q_len", "k_bits"]
    codes = rows[cols].groupby(cols, dropna=False, sort=False).ngroup().to_numpy()
    _, first = np.unique(codes, return_index=True)
    reps = rows[cols].iloc[first].astype(object).where(rows[cols].iloc[first].notna(), None)
    names = np.asarray([launch_class(r) for r in reps.to_dict("records")], dtype=object)
    return names[codes]


def _band(rows: pd.DataFrame) -> np.ndarray:
    att = rows["op"].isin(["attention", "kv_quant"])
    m = rows["m"].astype("Float64").where(~att, rows["batch"].astype("Float64")
                                          * rows["q_len"].astype("Float64"))
    return band_of(m.to_numpy(dtype=float, na_value=np.nan))


def validate_trace(trace: Trace, hw: HardwareSpec,
                   cache_dir: str | Path | None = DEFAULT_CACHE) -> TraceValidation:
    rows = trace.rows
    measured = rows["measured_us"].to_numpy(dtype=float, na_value=np.nan)
    has = np.isfinite(measured)
    if not has.any():
        raise MpsimInputError("the trace has no measured_us values: validation needs a captured trace "
                              "(measured times), not a synthesized one")
    if (measured[has] <= 0).any():
        row = int(np.flatnonzero(has & (measured <= 0))[0])
        raise MpsimInputError(f"row {row}, column 'measured_us': must be > 0 for every measured launch, "
                              f"got {measured[row]}")
    protocol = trace.meta.protocol
    sim = simulate(trace, hw, "sim", cache_dir=cache_dir,
                   protocol=protocol or DEFAULT_PROTOCOL).launches
    frame = rows.copy()
    frame["cls"], frame["band"] = _classes(rows), _band(rows)
    overhead = sim["overhead_s"].to_numpy()
    frame["predicted_us"] = (sim["kernel_s"].to_numpy() + overhead) * 1e6
    frame["roofline_us"] = (sim["t_lower_s"].to_numpy() + overhead) * 1e6
    frame["error"] = (frame["predicted_us"] - measured) / measured
    frame["config"] = [json.dumps({"kernel": k, "grid": json.loads(g), **json.loads(c)},
                                  separators=(",", ":"))
                       for k, g, c in zip(rows["kernel"], rows["grid"], rows["config"], strict=True)]
    frame["status"] = np.where(has, "ok", "not measured")
    scored = frame[has].assign(measured_us=measured[has])
    return TraceValidation(frame, summary_table(scored, MODELS),
                           status_counts(frame["status"], frame["cls"]), protocol)
