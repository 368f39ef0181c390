"""`mpsim calibrate TRACE`: fit a hardware file's efficiency knobs to measured launch times, and
report held-out error.

Constants, three fields of the one settings type (constants.py `Constants`): the achievable DRAM
bandwidth fraction, the launch overhead (`launch_overhead_us`: a GPU's graph gap per kernel, an
NPU's dispatch), and `dequant_scale`, the factor on dequantization work per weight (the rate it
runs at divided by it: a GPU's CUDA-core int32 ops per clock per SM, an NPU's weight decoder).
Launches are split by launch key (identical launches stay on one side): keys in a fixed order,
every ceil(1/holdout)-th held out.
The fit minimizes the time-weighted absolute error (sum |pred - meas| / sum meas, so a 5 ms GEMV
counts more than a 4 us norm; MAPE is reported) on the training launches: a coarse
grid over (bandwidth fraction, dequant scale), then golden-section refinement of each around the best
grid point; the overhead (an additive term) is fitted inside every evaluation, which costs no
simulation. A knob moves only if that lowers the training error by more than 0.1% (a knob the trace
cannot see, e.g. dequant in an fp16 trace, keeps its value).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpsim.analysis.validation.constants import Constants, apply_hw, trace_constants_of
from mpsim.analysis.validation.search import golden
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, NpuSpec
from mpsim.sim.gpu.library import launch_kernels
from mpsim.sim.keys import key_text, launch_keys, rep_row
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import DEFAULT_PROTOCOL, for_device
from mpsim.sim.replay import resident_cap, simulate_launch
from mpsim.sim.roofline import roofline

BOUNDS = {"bandwidth_fraction": (0.2, 1.0), "launch_overhead_us": (0.0, 50.0), "dequant_scale": (0.1, 10.0)}
KNOBS = ("bandwidth_fraction", "launch_overhead_us", "dequant_scale")
GRID = {"bandwidth_fraction": np.linspace(0.3, 1.0, 8), "dequant_scale": np.geomspace(0.25, 4.0, 9)}
MIN_GAIN = 1e-3


@dataclass(frozen=True)
class CalibrationResult:
    before: Constants
    after: Constants
    train_mape_before: float
    train_mape_after: float
    test_mape_before: float
    test_mape_after: float
    test_mape_roofline: float
    train_launches: int
    test_launches: int


class _Evaluator:
    """Predicted seconds of the measured launches for any knobs (kernel bodies memoized)."""

    def __init__(self, rows: pd.DataFrame, hw: GpuSpec | NpuSpec, params: SimParams) -> None:
        self.hw, self.params = hw, params
        codes, reps = launch_keys(rows, resident_cap(hw, params))
        self.reps = [rep_row(r) for r in reps.to_dict("records")]
        order = sorted(range(len(self.reps)), key=lambda i: key_text(self.reps[i]))
        self.rank = np.empty(len(order), dtype=np.int64)
        self.rank[order] = np.arange(len(order))
        measured = rows["measured_us"].notna().to_numpy()
        self.codes = codes[measured]
        self.measured_s = rows["measured_us"].to_numpy(dtype=float)[measured] * 1e-6
        self.lower = roofline(rows, hw)["t_lower_s"].to_numpy()[measured]
        self.roofline_s = self.lower
        self.gpu = isinstance(hw, GpuSpec)  # GPU kernels per launch: what the graph gap multiplies
        self.launches = np.array([launch_kernels(self.reps[c]) if self.gpu else 1 for c in self.codes])
        self._kernels: dict[tuple[float, float], np.ndarray] = {}

    def test_mask(self, holdout: float) -> np.ndarray:
        every = max(2, math.ceil(1 / holdout))
        return (self.rank[self.codes] % every) == every - 1

    def kernel_s(self, k: Constants) -> np.ndarray:
        key = (k.bandwidth_fraction, k.dequant_scale)
        if key not in self._kernels:
            hw = apply_hw(self.hw, k)
            used = np.unique(self.codes)
            out = np.full(len(self.reps), np.nan)
            for c in used:
                row = self.reps[c]
                out[c] = simulate_launch(row, hw, self.params, float(row["resident"])).kernel_s
            self._kernels[key] = out
        return self._kernels[key][self.codes]

    def predict(self, k: Constants) -> np.ndarray:
        """Kernel bodies plus the launch overhead: the device's graph gap per GPU kernel
        (mpsim/sim/protocols.py), an NPU's dispatch (its hardware cost) per launch."""
        o = k.launch_overhead_us or 0.0
        cost = for_device(DEFAULT_PROTOCOL, o).cost_s(self.launches) if self.gpu else o * 1e-6
        return np.maximum(self.kernel_s(k) + cost, self.lower)

    def mape(self, k: Constants, mask: np.ndarray) -> float:
        return mape(self.predict(k)[mask], self.measured_s[mask])

    def loss(self, k: Constants, mask: np.ndarray) -> float:
        """What the fit minimizes: time-weighted absolute error, sum |pred - meas| / sum meas."""
        pred, meas = self.predict(k)[mask], self.measured_s[mask]
        return float(np.abs(pred - meas).sum() / meas.sum())


def mape(pred: np.ndarray, measured: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - measured) / measured) * 100) if len(measured) else math.nan


def _fit_overhead(ev: _Evaluator, k: Constants, mask: np.ndarray) -> Constants:
    best = golden(lambda o: ev.loss(dataclasses.replace(k, launch_overhead_us=o), mask),
                   *BOUNDS["launch_overhead_us"], log=False)
    return dataclasses.replace(k, launch_overhead_us=best)


def _err(ev: _Evaluator, k: Constants, mask: np.ndarray) -> tuple[float, Constants]:
    fitted = _fit_overhead(ev, k, mask)
    return ev.loss(fitted, mask), fitted


def _grid(ev: _Evaluator, k: Constants, mask: np.ndarray) -> Constants:
    points = [dataclasses.replace(k, bandwidth_fraction=float(b), dequant_scale=float(d))
              for b in GRID["bandwidth_fraction"] for d in GRID["dequant_scale"]]
    def rank(t: tuple[float, Constants]) -> tuple[float, float, float]:
        # Equal errors (a knob the trace cannot see): stay nearest to where the knobs started.
        return (float(f"{t[0]:.9g}"), abs(math.log(t[1].dequant_scale / k.dequant_scale)),
                abs(t[1].bandwidth_fraction - k.bandwidth_fraction))

    return min((_err(ev, p, mask) for p in points), key=rank)[1]


def _refine(ev: _Evaluator, k: Constants, name: str, mask: np.ndarray) -> Constants:
    """Golden-section over one knob, within one grid step of its value."""
    grid = GRID[name]
    i = int(np.argmin(np.abs(grid - getattr(k, name))))
    lo, hi = float(grid[max(0, i - 1)]), float(grid[min(len(grid) - 1, i + 1)])
    best = golden(lambda v: _err(ev, dataclasses.replace(k, **{name: v}), mask)[0], lo, hi,
                   log=name == "dequant_scale")
    return _err(ev, dataclasses.replace(k, **{name: best}), mask)[1]


def _accept(ev: _Evaluator, old: Constants, new: Constants, mask: np.ndarray) -> Constants:
    return new if ev.loss(new, mask) < ev.loss(old, mask) * (1 - MIN_GAIN) else old


def calibrate(rows: pd.DataFrame, hw: GpuSpec | NpuSpec, holdout: float = 0.25,
              params: SimParams = DEFAULT_PARAMS) -> CalibrationResult:
    """Fit the knobs on the training launches of `rows` (those with measured_us)."""
    if not 0 < holdout < 1:
        raise MpsimInputError(f"holdout must be in (0, 1), got {holdout}")
    if rows["measured_us"].notna().sum() == 0:
        raise MpsimInputError("the trace has no measured_us values; calibration needs a captured trace")
    measured = rows["measured_us"].dropna().to_numpy(dtype=float)
    if not (np.isfinite(measured) & (measured > 0)).all():
        raise MpsimInputError("measured_us must be a finite number > 0 for every measured launch")
    ev = _Evaluator(rows, hw, params)
    test = ev.test_mask(holdout)
    train = ~test
    fitted = len(KNOBS)
    distinct = len(np.unique(ev.codes[train]))
    if distinct < fitted or not test.any():
        raise MpsimInputError(
            f"calibration needs at least {fitted} distinct measured launches to fit its {fitted} "
            f"knobs ({', '.join(KNOBS)}) and one held out; "
            f"this trace has {distinct} to fit and {len(np.unique(ev.codes[test]))} held out")
    start = trace_constants_of(hw, params)
    k = _accept(ev, start, _fit_overhead(ev, start, train), train)
    k = _accept(ev, k, _grid(ev, k, train), train)
    for name in ("bandwidth_fraction", "dequant_scale"):
        k = _accept(ev, k, _refine(ev, k, name, train), train)
    result = CalibrationResult(
        start, k, ev.mape(start, train), ev.mape(k, train), ev.mape(start, test), ev.mape(k, test),
        mape(ev.roofline_s[test], ev.measured_s[test]), int(train.sum()), int(test.sum()))
    numbers = [k.bandwidth_fraction, k.launch_overhead_us or 0.0, k.dequant_scale,
               result.train_mape_before, result.train_mape_after, result.test_mape_before,
               result.test_mape_after, result.test_mape_roofline]
    if not all(math.isfinite(v) for v in numbers):
        raise MpsimInputError(f"calibration did not give finite numbers ({result}); nothing written")
    return result
