"""One-dimensional and multi-dimensional minimizers for the fits of validation and calibration:
golden-section search (one constant on an interval) and a plain Nelder-Mead (several jointly)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

GOLDEN_STEPS = 14


def golden(f: Callable[[float], float], lo: float, hi: float, log: bool = False,
           steps: int = GOLDEN_STEPS) -> float:
    """The minimum of a one-dimensional f on [lo, hi] by golden-section search (on a log scale
    with `log`), after `steps` narrowings."""
    a, b = (math.log(lo), math.log(hi)) if log else (lo, hi)
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = b - g * (b - a), a + g * (b - a)
    to: Callable[[float], float] = math.exp if log else float
    f1, f2 = f(to(x1)), f(to(x2))
    for _ in range(steps):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = f(to(x1))
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = f(to(x2))
    return to(x1 if f1 <= f2 else x2)


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.1,
                iters: int = 400, tol: float = 1e-9) -> tuple[np.ndarray, float]:
    """Minimize f over R^n from x0 (a plain Nelder-Mead; returns the best point and value)."""
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = int(np.argmin(vals))
    return pts[best], vals[best]
