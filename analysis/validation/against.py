"""`mpsim validate --against FILE`: a published (or hand-written) measured table in, errors out.

The table is read into generic rows (sources.py), optionally narrowed to a named selection and to a
stratified sample of at most N of the selected rows (sampling.py), every
row predicted by the simulator and the roofline under the row's protocol and scope (predict.py),
and summarized per op class and M band (metrics.py). The rows file has one row per input row in
input order: every input column unchanged, then OUT_COLUMNS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mpsim.analysis.validation.measured import Measurements, activation_rows, band_of
from mpsim.analysis.validation.metrics import status_counts, summary_table
from mpsim.analysis.validation.predict import Prediction, predict_rows
from mpsim.analysis.validation.sampling import stratified_sample
from mpsim.analysis.validation.selections import apply_selection
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.sim import DEFAULT_CACHE
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import ProtocolFile

OUT_COLUMNS = ("predicted_us", "roofline_us", "error", "config", "status")
MODELS = {"simulator": "predicted_us", "roofline": "roofline_us"}


@dataclass
class AgainstResult:
    measurements: Measurements
    frame: pd.DataFrame       # normalized rows + band + the prediction columns
    prediction: Prediction
    summary: pd.DataFrame     # long: cls, band, model, count, mape_pct, ...
    unpredicted: pd.DataFrame  # status, cls, rows

    @property
    def rows_table(self) -> pd.DataFrame:
        """Every input column unchanged, then predicted_us, roofline_us, error, config, status."""
        clash = [c for c in OUT_COLUMNS if c in self.measurements.input.columns]
        if clash:
            raise MpsimInputError(f"the input already has column(s) {clash}, which the rows file "
                                  "adds; rename them first")
        out = self.measurements.input.reset_index(drop=True).copy()
        for c in OUT_COLUMNS:
            out[c] = self.frame[c].to_numpy()
        return out


def result_frame(rows: pd.DataFrame, p: Prediction) -> pd.DataFrame:
    frame = rows.reset_index(drop=True).copy()
    frame["band"] = band_of(activation_rows(frame))
    frame["predicted_us"], frame["roofline_us"] = p.predicted_us, p.roofline_us
    meas = frame["measured_us"].to_numpy(dtype=float)
    frame["error"] = (p.predicted_us - meas) / meas
    frame["config"], frame["status"] = p.config, p.status
    frame["t_math_us"], frame["t_mem_us"], frame["kernel_us"] = p.t_math_us, p.t_mem_us, p.kernel_us
    frame["launches"] = p.launches
    return frame


def validate_against(m: Measurements, hw: HardwareSpec, *, config: str = "best",
                     selection: str | None = None, sample: int | None = None,
                     cache_dir: str | Path | None = DEFAULT_CACHE, params: SimParams = DEFAULT_PARAMS,
                     protocols: ProtocolFile | None = None,
                     progress: bool | None = None) -> AgainstResult:
    m = apply_selection(m, selection)
    if sample is not None:
        m = stratified_sample(m, sample)
    p = predict_rows(m.rows, hw, config=config, cache_dir=cache_dir, params=params,
                     protocols=protocols, progress=progress)
    frame = result_frame(m.rows, p)
    summary = summary_table(frame, MODELS)
    return AgainstResult(m, frame, p, summary, status_counts(frame["status"], frame["cls"]))


def format_unpredicted(unpredicted: pd.DataFrame, total: int) -> str:
    if unpredicted.empty:
        return f"all {total} rows predicted"
    lines = [f"{int(unpredicted['rows'].sum())} of {total} rows not predicted:"]
    for status, g in unpredicted.groupby("status", sort=False):
        parts = ", ".join(f"{c} {n}" for c, n in zip(g["cls"], g["rows"], strict=True))
        lines.append(f"  {int(g['rows'].sum()):7d}  {status}  [{parts}]")
    return "\n".join(lines)


def ok_mask(frame: pd.DataFrame) -> np.ndarray:
    return (frame["status"] == "ok").to_numpy()
