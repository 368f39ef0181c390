"""`mpsim calibrate --against FILE --fit-params NAMES`: named simulator constants fitted jointly.

The GPU model's constants (SimParams, mpsim/sim/params.py) were set by fitting a few of them at a
time to the published rows they govern (docs/simulator.md#constants-and-where-they-come-from). This
is that fit as a calibration option: after the named constants of constants.py are fitted, the
SimParams fields in NAMES move together (Nelder-Mead in log space, every field > 0) to lower the
same loss as the rest of the calibration (calibration.py: mean MAPE over class and M band groups),
each protocol's per-call cost refitted at every step (additive, no simulation). Every step
re-simulates the fitted rows with the GEMM configs chosen at the shipped constants. The fitted
values go into the calibration file (`sim_params`), which `mpsim validate --calibration` applies.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mpsim.analysis.validation.calibration import Evaluator, fit_protocols
from mpsim.analysis.validation.constants import FITTABLE_PARAMS, Constants, apply_params
from mpsim.analysis.validation.search import nelder_mead
from mpsim.errors import MpsimInputError
from mpsim.sim.params import get_param

STEP = 0.1  # the simplex's first step in log space (~10%)
MIN_GAIN = 1e-3


def parse_fit_params(text: str | None) -> tuple[str, ...]:
    """`--fit-params a,b`: SimParams float fields or `<library>.<field>` (`fa3.softmax_ops`), each
    once (checked before any work)."""
    if text is None:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in FITTABLE_PARAMS]
    if not names or bad or len(set(names)) != len(names):
        raise MpsimInputError(f"--fit-params {text!r}: expected distinct simulator constants, "
                              f"comma-separated, from: {', '.join(FITTABLE_PARAMS)}")
    return names


def fit_params(ev: Evaluator, c: Constants, mask: np.ndarray, names: tuple[str, ...],
               iters: int) -> Constants:
    """`c` with the SimParams fields `names` fitted jointly (kept if the fit gains under 0.1%)."""
    if iters < 1:
        raise MpsimInputError(f"--fit-iters {iters}: expected at least 1")
    current = apply_params(ev.params, c)
    start = np.array([get_param(current, n) for n in names])
    if (start <= 0).any():
        raise MpsimInputError(f"--fit-params: {[n for n, v in zip(names, start, strict=True) if v <= 0]} "
                              "are not > 0 (fitted in log space)")

    def with_values(x: np.ndarray) -> Constants:
        values = {n: float(math.exp(v)) for n, v in zip(names, x, strict=True)}
        return fit_protocols(ev, dataclasses.replace(c, params={**c.params, **values}), mask)

    x, _ = nelder_mead(lambda x: ev.loss(with_values(x), mask), np.log(start), STEP, iters=iters)
    fitted = with_values(x)
    return fitted if ev.loss(fitted, mask) < ev.loss(c, mask) * (1 - MIN_GAIN) else c
