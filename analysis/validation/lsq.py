"""Robust bounded least squares for a few parameters whose residuals are costly (each evaluation
may re-simulate rows): Levenberg-Marquardt with iteratively reweighted soft-L1 loss, numpy only.

Minimizes sum_i rho(r_i(x)), rho(r) = 2 f^2 (sqrt(1 + (r/f)^2) - 1) (scipy's "soft_l1": quadratic
near 0, linear beyond f, so a few rows far off do not dominate), with x kept in [lo, hi]
(a step is projected onto the box). Each iteration: the Jacobian J from `jac(x)`, the weights
w_i = 1 / sqrt(1 + (r_i/f)^2) (rho'(r) / 2r), then the damped normal equations
(J^T W J + lam diag(J^T W J)) dx = -J^T W r; a step that lowers the cost is taken and lam shrinks
(x 0.3), else lam grows (x 10) and the step is retried, at most `max_iters` Jacobians in all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LsqResult:
    x: np.ndarray
    cost: float
    cost_start: float
    iterations: int


def soft_l1(r: np.ndarray, f: float) -> float:
    return float(np.sum(2 * f * f * (np.sqrt(1 + (r / f) ** 2) - 1)))


def forward_jacobian(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray, r0: np.ndarray,
                     steps: np.ndarray) -> np.ndarray:
    cols = []
    for i, h in enumerate(steps):
        xi = x.copy()
        xi[i] += h
        cols.append((fun(xi) - r0) / h)
    return np.stack(cols, axis=1)


def robust_lsq(fun: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, steps: np.ndarray, f_scale: float = 0.1, max_iters: int = 8,
               tol: float = 1e-4) -> LsqResult:
    x = np.clip(np.asarray(x0, dtype=float), lo, hi)
    r = fun(x)
    cost = start = soft_l1(r, f_scale)
    lam, iters = 1e-2, 0
    while iters < max_iters:
        iters += 1
        jac = forward_jacobian(fun, x, r, steps)
        w = 1.0 / np.sqrt(1 + (r / f_scale) ** 2)
        a = jac.T @ (w[:, None] * jac)
        g = jac.T @ (w * r)
        improved = False
        for _ in range(6):
            d = np.diag(a).copy()
            d[d <= 0] = 1e-12
            try:
                dx = np.linalg.solve(a + lam * np.diag(d), -g)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            xn = np.clip(x + dx, lo, hi)
            rn = fun(xn)
            cn = soft_l1(rn, f_scale)
            if np.isfinite(cn) and cn < cost:
                gain = (cost - cn) / max(cost, 1e-300)
                x, r, cost, lam, improved = xn, rn, cn, lam * 0.3, True
                break
            lam *= 10
        if not improved or gain < tol:
            break
    return LsqResult(x, cost, start, iters)
