"""The device-independent constants of the GPU model, fitted jointly on the rows of several GPUs
(the fit behind leave-one-device-out, loo.py).

Which constants. The GPU model's constants (SimParams, mpsim/sim/params.py) split in two:
- per-device physics, which a leave-one-out fit must NOT move because on an unmeasured GPU they
  come from its datasheet (or, today, stay at the value shipped): the achievable DRAM bandwidth
  (`bw_frac`) and the L2 port (`port_bytes_per_clk`), the power-limited clock (mpsim/sim/gpu/
  power.py from each file's TDP and clocks: `power_overhead`, `voltage_slope`), DRAM / L2
  latencies, the shared-memory port, the usable
  L2 share (issue 24 names each one as physics of one device);
- device-independent constants: work per element and fixed costs of a kernel library, the tensor
  pipe's efficiency relative to its datasheet peak, the smallest kernel's floor, and each timing
  protocol's per-call cost. Those are what a user carries to a GPU nobody measured, so those are
  what this module fits: the candidates of each class are `CANDIDATES` below.

How. Rows of each GPU are priced by that GPU's own calibration.Evaluator (its hardware file, its
shipped per-device constants, its GEMM configs chosen once at the shipped constants and held).
The shared constants move together: robust bounded least squares (lsq.py: Levenberg-Marquardt,
soft-L1 loss, f_scale 0.1 on the relative error, so a few rows off by 100% do not pull the rest)
on residuals (predicted - measured) / measured, each weighted 1/sqrt(size of its (GPU, class, M
band) group) so every group of every GPU weighs alike. The simulator constants are fitted in log space
(bounded to a factor MAX_FACTOR of the shipped value); the protocol costs (additive, no
re-simulation) in microseconds, bounded to [0, PROTOCOL_MAX_US]. The Jacobian is a forward
difference (a re-simulation per simulator constant, the protocol columns from the cached kernel
sums). Before the fit, the candidates are screened: one re-simulation each at +10%, and only
those that move some fitted row's prediction by more than SCREEN_REL are fitted (a constant of a
kernel none of the fitted GPUs ran cannot be fitted on them and stays shipped; loo.py says which).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpsim.analysis.validation.calibration import Evaluator
from mpsim.analysis.validation.constants import Constants, constants_of
from mpsim.analysis.validation.lsq import robust_lsq
from mpsim.errors import MpsimInputError
from mpsim.sim.params import get_param

# Per class: the device-independent constants a fit may move (why each is device-independent).
CANDIDATES: dict[str, tuple[str, ...]] = {
    "gemm": (
        "eta_mma",              # tensor-pipe efficiency vs the datasheet peak (clock is separate)
        "cublas.tile_ns",       # cuBLAS fixed time per output tile (prologue/epilogue work)
        "cublas.sk_fixup_us",   # stream-K / split-K fix-up pass
        "kernel_floor_us",      # smallest kernel's body (launch-to-exit floor)
    ),
    "decode": (  # per kernel: softmax work per score, fixed cost per call (its scope); the
        # kernel floor is GEMM's alone, so each constant has one fitted value per fold
        "trtllm.xqa_softmax_ops", "trtllm.xqa_scope_us",       # TRT-LLM's XQA, every GPU
        "fa3.softmax_ops", "fa3.decode_scope_us",              # vLLM FA3, Hopper
        "fa2.softmax_ops", "fa2.decode_scope_us",              # vLLM FA2, Ada
        "flashinfer.decode_scope_us",                          # vLLM FlashInfer fp8, Ada
        "flashinfer.tg_decode_scope_us",                       # vLLM FlashInfer-TRT-LLM, Blackwell
    ),
}
MAX_FACTOR = 4.0
PROTOCOL_MAX_US = 60.0
SCREEN_STEP = 0.10
SCREEN_REL = 1e-3
JAC_STEP = 0.03       # log space (~3%)
PROTOCOL_STEP = 0.05  # us
F_SCALE = 0.1
MAX_ITERS = 4         # Jacobian evaluations (each one re-simulation per fitted simulator constant)


@dataclass
class Pool:
    """One GPU's rows of one class, priced by its own Evaluator at its shipped per-device constants."""

    gpu: str
    ev: Evaluator

    @property
    def base(self) -> Constants:
        return constants_of(self.ev.hw, self.ev.table, self.ev.params)

    def constants(self, params: dict[str, float], protocol_us: dict[str, float]) -> Constants:
        b = self.base
        return dataclasses.replace(b, params={**b.params, **params},
                                   protocol_us={**b.protocol_us, **protocol_us})

    def predict(self, params: dict[str, float], protocol_us: dict[str, float]) -> np.ndarray:
        return self.ev.predict(self.constants(params, protocol_us))


@dataclass(frozen=True)
class Fit:
    params: dict[str, float]        # the fitted simulator constants (fitted names only)
    protocol_us: dict[str, float]   # the fitted per-call costs
    screened_out: tuple[str, ...]   # candidates the fitted rows do not respond to (kept shipped)
    cost_before: float
    cost_after: float
    simulations: int


def _weights(pool: Pool) -> np.ndarray:
    groups = pd.Series(pool.ev.groups)  # class | M band
    size = groups.map(groups.value_counts()).to_numpy(dtype=float)
    return 1.0 / np.sqrt(size)


def screen(pools: list[Pool], candidates: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(candidates some fitted row responds to, the others)."""
    kept: list[str] = []
    out: list[str] = []
    for name in candidates:
        moved = False
        for p in pools:
            v = get_param(p.ev.params, name)
            base = p.predict({}, {})
            moved_to = p.predict({name: v * (1 + SCREEN_STEP)}, {})
            ok = np.isfinite(base) & np.isfinite(moved_to)
            if ok.any() and np.max(np.abs(moved_to[ok] - base[ok]) / base[ok]) > SCREEN_REL:
                moved = True
                break
        (kept if moved else out).append(name)
    return kept, out


def fit_shared(pools: list[Pool], candidates: tuple[str, ...], max_iters: int = MAX_ITERS) -> Fit:
    """Fit the candidates (screened) and every protocol the rows use, jointly on all `pools`."""
    if not pools:
        raise MpsimInputError("leave-one-out fit: no GPU rows to fit on")
    sims0 = sum(p.ev.simulations for p in pools)
    names, out = screen(pools, candidates)
    protocols = sorted({str(v) for p in pools for v in p.ev.rows["protocol"].dropna()})
    shipped = pools[0].ev.params
    start = np.array([get_param(shipped, n) for n in names])
    if (start <= 0).any():
        raise MpsimInputError(f"leave-one-out fit: {names} must be > 0 (fitted in log space)")
    proto0 = np.array([pools[0].base.protocol_us[k] for k in protocols])
    weights = [_weights(p) for p in pools]
    n_rows = sum(int(np.isfinite(p.predict({}, {})).sum()) for p in pools)
    if n_rows < len(names) + len(protocols):
        raise MpsimInputError(f"leave-one-out fit on {'+'.join(p.gpu for p in pools)}: {n_rows} predicted "
                              f"rows for {len(names) + len(protocols)} constants "
                              f"({', '.join(names + protocols)}); give more rows (--sample)")

    def unpack(x: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
        k = len(names)
        return ({n: float(math.exp(v)) for n, v in zip(names, x[:k], strict=True)},
                {n: float(v) for n, v in zip(protocols, x[k:], strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        params, proto = unpack(x)
        parts = []
        for p, w in zip(pools, weights, strict=True):
            r = (p.predict(params, proto) - p.ev.measured) / p.ev.measured * w
            parts.append(np.where(np.isfinite(r), r, 0.0))
        return np.concatenate(parts)

    x0 = np.concatenate([np.log(start), proto0])
    lo = np.concatenate([np.log(start / MAX_FACTOR), np.zeros(len(protocols))])
    hi = np.concatenate([np.log(start * MAX_FACTOR), np.full(len(protocols), PROTOCOL_MAX_US)])
    steps = np.array([JAC_STEP] * len(names) + [PROTOCOL_STEP] * len(protocols))
    res = robust_lsq(residuals, x0, lo, hi, steps, f_scale=F_SCALE, max_iters=max_iters)
    x = res.x
    params, proto = unpack(x)
    if not all(math.isfinite(v) for v in [*params.values(), *proto.values()]):
        raise MpsimInputError(f"leave-one-out fit did not give finite constants: {params} {proto}")
    return Fit(params, proto, tuple(out), res.cost_start, res.cost,
               sum(p.ev.simulations for p in pools) - sims0)
