"""`mpsim calibrate --against FILE --hw H --out F.yaml [--predict H2=FILE2]`.

Fits the named device-independent constants of mpsim/analysis/validation/constants.py (achievable DRAM
bandwidth fraction, L2 bytes per clock per SM, dequantization work per weight, each protocol's
fixed cost per call) on a deterministic sample of the measured rows of one device, and reports the
error three ways: in-sample (the rows fitted), held-out shapes of the same device, and other
devices predicted with only their datasheet numbers changed.

Split: the predictable rows in file order; every ceil(n / fit_rows)-th is fitted, and up to
test_rows of the rest (evenly spaced) are held out. Loss: the mean over (class, M band) groups of
the MAPE (so a small band weighs as much as a large one). Search: a grid over (bandwidth fraction,
L2 bandwidth), then golden-section refinement of each and of the dequant scale (only when the rows
have quantized weights); protocol costs are additive and fitted inside every evaluation (no
simulation). A constant moves only if that lowers the loss by more than 0.1%.

Refused (MpsimInputError): fewer predicted fit rows than constants fitted (`fitted_names`: the
bandwidth fraction, the L2 port, the dequant scale when a fitted row has quantized weights, and one
per-call cost per protocol the fitted rows use), which would fit noise exactly (0% error); a fit or
an error that is not a finite number.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mpsim.analysis.validation.constants import (
    Constants,
    apply_hw,
    apply_params,
    apply_protocols,
    constants_of,
)
from mpsim.analysis.validation.measured import activation_rows, band_of
from mpsim.analysis.validation.predict import predict_rows
from mpsim.analysis.validation.search import golden
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import HardwareSpec
from mpsim.progress import progress_bar, progress_enabled
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import ProtocolFile, call_costs_us, shipped

BW_GRID = np.linspace(0.60, 0.95, 8)
L2_SCALES = np.geomspace(0.5, 2.5, 5)
GOLDEN_STEPS = 12
MIN_GAIN = 1e-3
PROTOCOL_MAX_US = 60.0
PROTOCOL_STEPS = 30  # additive: no simulation per step, so fit it to ~0.001 us


class Evaluator:
    """Predictions of a fixed set of measured rows for any constants (kernel sums memoized)."""

    def __init__(self, rows: pd.DataFrame, hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS,
                 table: ProtocolFile | None = None, config: str = "best",
                 progress: bool | None = False) -> None:
        self.rows = rows.reset_index(drop=True)
        self.hw, self.params, self.table, self.config = hw, params, table or shipped(), config
        self.measured = self.rows["measured_us"].to_numpy(dtype=float)
        bands = band_of(activation_rows(self.rows))
        self.groups = pd.Series(self.rows["cls"].astype(str) + "|" + bands).to_numpy()
        self._cache: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.launches = np.zeros(len(self.rows), dtype=np.int64)
        self.lower = np.full(len(self.rows), np.nan)
        self.simulations = 0
        # GEMM configs are chosen once, under the first constants evaluated (the shipped ones), and
        # held while the constants move: the autotuner on the GPU picked them, not the fit.
        self.configs: dict[str, str] = {}
        self.progress = progress  # bars for the first evaluation (the config search), then a count
        self.bar: Any = None

    def kernel_us(self, c: Constants) -> np.ndarray:
        key = (round(c.bandwidth_fraction, 6), round(c.l2_bytes_per_clock_per_sm, 6),
               round(c.dequant_scale, 6), *sorted(c.params.items()))
        if key not in self._cache:
            p = predict_rows(self.rows, apply_hw(self.hw, c), config=self.config, cache_dir=None,
                             params=apply_params(self.params, c), protocols=self.table,
                             configs=self.configs, progress=self.progress and not self.simulations)
            self.launches, self.lower = p.launches, p.lower_us
            self._cache[key] = (p.kernel_us, p.lower_us)
            self.simulations += 1
            if self.bar is None:
                self.bar = progress_bar(None, f"calibrate on {self.hw.name}", "simulation",
                                        self.progress)
            self.bar.update(1)
        return self._cache[key][0]

    def predict(self, c: Constants) -> np.ndarray:
        return self.kernel_us(c) + call_costs_us(self.rows["protocol"], self.launches,
                                                    apply_protocols(self.table, c))

    def roofline(self, c: Constants) -> np.ndarray:
        """t_lower (datasheet peaks: no constant moves it) plus the protocol costs of `c`."""
        self.kernel_us(c)
        return self.lower + call_costs_us(self.rows["protocol"], self.launches,
                                        apply_protocols(self.table, c))

    def loss(self, c: Constants, mask: np.ndarray) -> float:
        e = np.abs(self.predict(c) - self.measured) / self.measured
        e, g = e[mask], self.groups[mask]
        ok = np.isfinite(e)
        return float(pd.Series(e[ok]).groupby(g[ok]).mean().mean()) if ok.any() else math.inf


def fit_protocols(ev: Evaluator, c: Constants, mask: np.ndarray) -> Constants:
    """Each protocol the fitted rows use: its per-call cost, others held (two passes)."""
    used = sorted(set(ev.rows["protocol"][mask]))
    for _ in range(2 if len(used) > 1 else 1):
        for name in used:
            best = golden(_protocol_loss(ev, c, mask, name), 0.0, PROTOCOL_MAX_US, steps=PROTOCOL_STEPS)
            c = dataclasses.replace(c, protocol_us={**c.protocol_us, name: round(best, 3)})
    return c


def _protocol_loss(ev: Evaluator, c: Constants, mask: np.ndarray, name: str) -> Callable[[float], float]:
    def loss(v: float) -> float:
        return ev.loss(dataclasses.replace(c, protocol_us={**c.protocol_us, name: v}), mask)
    return loss


def _accept(ev: Evaluator, old: Constants, new: Constants, mask: np.ndarray) -> Constants:
    return new if ev.loss(new, mask) < ev.loss(old, mask) * (1 - MIN_GAIN) else old


def _with(ev: Evaluator, c: Constants, mask: np.ndarray, **changes: float) -> Constants:
    return fit_protocols(ev, dataclasses.replace(c, **changes), mask)  # type: ignore[arg-type]


def _grid(ev: Evaluator, c: Constants, mask: np.ndarray) -> Constants:
    l2 = c.l2_bytes_per_clock_per_sm
    points = [_with(ev, c, mask, bandwidth_fraction=float(b), l2_bytes_per_clock_per_sm=float(l2 * s))
              for b in BW_GRID for s in L2_SCALES]
    return min(points, key=lambda p: ev.loss(p, mask))


def _refine(ev: Evaluator, c: Constants, mask: np.ndarray, name: str, lo: float, hi: float,
            log: bool) -> Constants:
    best = golden(lambda v: ev.loss(_with(ev, c, mask, **{name: v}), mask), lo, hi, log, GOLDEN_STEPS)
    return _accept(ev, c, _with(ev, c, mask, **{name: best}), mask)


def fit_constants(ev: Evaluator, mask: np.ndarray) -> tuple[Constants, Constants]:
    """(shipped constants, fitted constants) on the rows in `mask`."""
    start = constants_of(ev.hw, ev.table, ev.params)
    c = _accept(ev, start, fit_protocols(ev, start, mask), mask)
    c = _accept(ev, c, _grid(ev, c, mask), mask)
    step = float(BW_GRID[1] - BW_GRID[0])
    c = _refine(ev, c, mask, "bandwidth_fraction", max(0.3, c.bandwidth_fraction - step),
                min(1.0, c.bandwidth_fraction + step), False)
    l2 = c.l2_bytes_per_clock_per_sm
    c = _refine(ev, c, mask, "l2_bytes_per_clock_per_sm", l2 / 1.5, l2 * 1.5, True)
    quantized = ev.rows["w_format"].astype(str).isin(["int4-group", "int8-group"])
    if quantized[mask].any():
        c = _refine(ev, c, mask, "dequant_scale", 0.25, 4.0, True)
    return start, c


def split(n_ok: np.ndarray, fit_rows: int, test_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, held-out) positions among the predictable rows `n_ok` (file order)."""
    stride = max(1, math.ceil(len(n_ok) / max(fit_rows, 1)))
    fit = n_ok[::stride]
    rest = np.setdiff1d(n_ok, fit)
    held = rest[::max(1, math.ceil(len(rest) / max(test_rows, 1)))] if len(rest) else rest
    return fit, held


def mape_pct(pred: np.ndarray, meas: np.ndarray) -> float:
    e = np.abs(pred - meas) / meas
    e = e[np.isfinite(e)]
    return float(100 * e.mean()) if len(e) else math.nan


def errors(ev: Evaluator, mask: np.ndarray, before: Constants, after: Constants) -> dict[str, float]:
    meas = ev.measured[mask]
    return {"rows": int(mask.sum()), "before_mape_pct": round(mape_pct(ev.predict(before)[mask], meas), 2),
            "after_mape_pct": round(mape_pct(ev.predict(after)[mask], meas), 2),
            "roofline_mape_pct": round(mape_pct(ev.roofline(before)[mask], meas), 2)}


@dataclass
class CalibrationReport:
    before: Constants
    after: Constants
    errors: dict[str, dict[str, float]]
    wall_s: float


def fitted_names(rows: pd.DataFrame) -> list[str]:
    """The constants a fit on `rows` moves."""
    quantized = rows["w_format"].astype(str).isin(["int4-group", "int8-group"]).any()
    protocols = sorted({str(p) for p in rows["protocol"].dropna()})
    return ["bandwidth_fraction", "l2_bytes_per_clock_per_sm", *(["dequant_scale"] if quantized else []),
            *(f"protocol_us.{p}" for p in protocols)]


Refine = Callable[["Evaluator", Constants, np.ndarray], Constants]


def _check_fit_rows(ev: Evaluator, fit_rows: int, extra: tuple[str, ...]) -> np.ndarray:
    """The fit rows the simulator predicts; refused when fewer than the constants fitted on them."""
    if fit_rows < 1:
        raise MpsimInputError(f"--fit-rows {fit_rows}: expected at least 1")
    predicted = np.isfinite(ev.predict(constants_of(ev.hw, ev.table, ev.params)))
    names = [*fitted_names(ev.rows[predicted]), *extra]
    if predicted.sum() < len(names):
        raise MpsimInputError(
            f"calibration needs at least as many predicted rows as constants it fits: "
            f"{int(predicted.sum())} of the {len(ev.rows)} fit rows can be predicted, for "
            f"{len(names)} constants ({', '.join(names)}); give more rows (--fit-rows, a larger "
            "table or another --select)")
    return predicted


def _check_finite(report: CalibrationReport) -> CalibrationReport:
    c = report.after
    values = [c.bandwidth_fraction, c.l2_bytes_per_clock_per_sm, c.dequant_scale,
              *c.protocol_us.values()]
    errs = [v for e in report.errors.values() for k, v in e.items() if k != "rows"]
    if not all(math.isfinite(v) for v in values + errs):
        raise MpsimInputError(f"calibration did not give finite numbers (constants {c}, errors "
                              f"{report.errors}); nothing written")
    return report


def calibrate_rows(rows: pd.DataFrame, hw: HardwareSpec, *, fit_rows: int = 400,
                   test_rows: int = 1500, params: SimParams = DEFAULT_PARAMS,
                   config: str = "best", progress: bool | None = None,
                   refine: tuple[tuple[str, ...], Refine] | None = None) -> CalibrationReport:
    """Fit on a sample of `rows` (normalized measured rows, only status ok used). `refine`: more
    constants (their names) and the fit that moves them after the named ones (fit_params.py)."""
    start = time.perf_counter()
    if test_rows < 0:
        raise MpsimInputError(f"--test-rows {test_rows}: expected at least 0")
    ok = np.flatnonzero((rows["status"] == "ok").to_numpy())
    if not len(ok):
        raise MpsimInputError(f"calibration: none of the {len(rows)} rows can be predicted (status: "
                              f"{sorted(set(rows['status'].astype(str)))[:5]}); nothing to fit")
    fit, held = split(ok, fit_rows, test_rows)
    ev = Evaluator(rows.iloc[fit], hw, params, config=config, progress=progress_enabled(progress))
    every = _check_fit_rows(ev, fit_rows, refine[0] if refine else ())
    before, after = fit_constants(ev, every)
    if refine is not None:
        after = refine[1](ev, after, every)
    if ev.bar is not None:
        ev.bar.close()
    errs = {"in_sample": errors(ev, every, before, after)}
    if len(held):
        held_ev = Evaluator(rows.iloc[held], hw, params, config=config,
                            progress=progress_enabled(progress))
        errs["held_out"] = errors(held_ev, np.ones(len(held), dtype=bool), before, after)
    return _check_finite(CalibrationReport(before, after, errs, time.perf_counter() - start))


def cross_device(rows: pd.DataFrame, hw: HardwareSpec, report: CalibrationReport, *,
                 test_rows: int = 1500, params: SimParams = DEFAULT_PARAMS,
                 config: str = "best") -> dict[str, float]:
    """Another device's rows with its datasheet file: shipped vs fitted constants."""
    ok = np.flatnonzero((rows["status"] == "ok").to_numpy())
    pick = ok[::max(1, math.ceil(len(ok) / max(test_rows, 1)))]
    ev = Evaluator(rows.iloc[pick].reset_index(drop=True), hw, params, config=config)
    before = constants_of(hw, ev.table, params)
    after = dataclasses.replace(report.after, protocol_us={**before.protocol_us,
                                                           **report.after.protocol_us})
    return errors(ev, np.ones(len(pick), dtype=bool), before, after)
