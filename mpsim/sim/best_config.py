"""Model-guided autotune: the launch config the simulator predicts fastest among candidates.

`best_config(build, candidates, hw)` builds one launch row per candidate config (`build(config) ->
row`, e.g. a `functools.partial` of mpsim.launch_plan.gemm_row with `config=`) and returns the
fastest by the GPU model, with its simulated outcome. The power-limited clock depends on the launch,
so the search follows the model's clock post-pass: every candidate is priced at the boost clock, the
fastest sets the clock, and the candidates are priced again at that clock (SimParams.power_iterations
times, or until the clock settles). Within one clock, candidates are simulated in order of a lower
bound on their time (mpsim.sim.gpu.model.lower_bound_s) and the search stops when the next bound is
no better than the best time found, so the answer is the exact argmin over the candidates at a small
share of their cost (`BestConfig.simulated` says how many SimPy runs it took). The winner's
`outcome` is what `mpsim.sim.simulate` gives for its row. Ties go to the earlier candidate.

`best_gemm_row` wraps it for one GEMM shape (`mpsim op gemm --config best`) and
`with_best_gemm_configs` for every GEMM of a synthesized trace (`mpsim synth --hw H --config
best`). The simulator never replaces a trace's recorded config: only callers that build their own
rows use this.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import gemm_row
from mpsim.library import (
    ARCH_CONFIGS,
    AUTOTUNED_CANDIDATES,
    AUTOTUNED_KERNELS,
    SCALED_CANDIDATES,
    WO_GEMM_KERNELS,
    cublas,
    trtllm,
    wo_candidates,
)
from mpsim.policy import FLOAT_FORMATS
from mpsim.sim.gpu.arch import candidate_family, generation
from mpsim.sim.gpu.model import lower_bound_s, power_clock, simulate_gpu_launch
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.result import LaunchOutcome
from mpsim.traces.trace import Trace
from mpsim.traces.validate import coerce_types

Row = dict[str, Any]


@dataclass(frozen=True)
class BestConfig:
    config: lc.LaunchConfig
    row: Row
    outcome: LaunchOutcome       # the simulator's outcome for `row` (its own clock post-pass)
    candidates: int              # configs considered
    simulated: int               # SimPy runs the search took (pruned by lower bounds)
    wall_s: float

    @property
    def predicted_s(self) -> float:
        return self.outcome.time_s


def best_config(build: Callable[[lc.LaunchConfig], Row], candidates: Sequence[lc.LaunchConfig],
                hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS,
                resident: float = 0.0) -> BestConfig:
    """The candidate whose launch the GPU model predicts fastest on `hw` (see the module doc)."""
    start = time.perf_counter()
    if not candidates:
        raise MpsimInputError("best_config: no candidate configs")
    rows = [build(c) for c in candidates]
    if not isinstance(hw, GpuSpec):  # the NPU model does not read GPU launch configs
        out = _simulate(rows[0], hw, params, resident)
        return BestConfig(candidates[0], rows[0], out, len(rows), 1, time.perf_counter() - start)
    clock = hw.compute.boost_clock_MHz * 1e6
    runs = 0
    best_i = 0
    for _ in range(params.power_iterations + 1):
        bounds = [lower_bound_s(row, hw, params, resident, clock) for row in rows]
        best_t = math.inf
        best_out = None
        for i in sorted(range(len(rows)), key=lambda j: (bounds[j], j)):
            if bounds[i] >= best_t:
                break
            run = simulate_gpu_launch(rows[i], hw, params, resident, clock_hz=clock)
            runs += 1
            if run.time_s < best_t or (run.time_s == best_t and i < best_i):
                best_i, best_t, best_out = i, run.time_s, run
        if best_out is None:  # every bound at infinity: nothing ran at this clock
            best_out = simulate_gpu_launch(rows[best_i], hw, params, resident, clock_hz=clock)
        new_clock = power_clock(hw, params, best_out)
        if abs(new_clock - clock) <= 1e-4 * clock:
            break
        clock = new_clock
    out = simulate_gpu_launch(rows[best_i], hw, params, resident)
    return BestConfig(candidates[best_i], rows[best_i], out, len(rows), runs + 1,
                      time.perf_counter() - start)


def _simulate(row: Row, hw: HardwareSpec, params: SimParams, resident: float) -> LaunchOutcome:
    from mpsim.sim.replay import simulate_launch  # replay imports this module's neighbours

    return simulate_launch(row, hw, params, resident)


def fixed_config(kernel: str | None, m: int, n: int, k: int, group: int | None,
                 hw: HardwareSpec, bits: int = 16) -> lc.LaunchConfig | None:
    """A library's own fixed choice of `kernel` (no search) on `hw`'s architecture: cuBLAS's
    heuristic per generation, the rooms' per-architecture dispatch (library.ARCH_CONFIGS: vLLM's sm89
    / sm90 fp8 dispatch, cuBLASLt's fp8 tile, GemLite's defaults, TensorRT-LLM's weight-only
    kernels by SM version at `bits`); None where the kernel's own
    default does not depend on the architecture, and off a GPU. A scaled kernel the architecture
    does not run (DeepGEMM on Ada, vLLM's Triton block kernel on Hopper) is one error."""
    if kernel is None or not isinstance(hw, GpuSpec):
        return None
    if kernel == cublas.CUBLAS_GEMM:
        return cublas_fixed_config(m, n, k, hw)
    if kernel in ARCH_CONFIGS:
        from mpsim.engines import architecture  # the engine files' names (engines import the rooms)

        return ARCH_CONFIGS[kernel](kernel, m, n, k, bits, group, hw.compute_units,
                                    architecture(hw))
    if kernel in SCALED_CANDIDATES:  # the room's own default, once it runs on the architecture
        gemm_candidate_configs(m, n, k, "fp8", 8, group, hw, kernel)
    return None


def cublas_fixed_config(m: int, n: int, k: int, hw: HardwareSpec) -> lc.LaunchConfig | None:
    """cuBLAS's fixed choice (no search) for `hw`'s GPU generation and shared memory; None off a
    GPU (the NPU model does not read GPU launch configs)."""
    if not isinstance(hw, GpuSpec):
        return None
    return cublas.cublas_heuristic(m, n, k, hw.compute_units, generation(hw),
                                   int(hw.sm.max_shared_memory_per_cta_KiB * 1024))


def gemm_candidate_configs(m: int, n: int, k: int, w_format: str, bits: int,
                           group_size: int | None, hw: HardwareSpec,
                           kernel: str | None = None) -> list[lc.LaunchConfig]:
    """The candidates of one GEMM shape on `hw`: mpsim's kernels (by architecture) or cuBLAS's."""
    sms = hw.compute_units
    if kernel == cublas.CUBLAS_GEMM:
        if not isinstance(hw, GpuSpec):
            return cublas.cublas_candidates(m, n, k, sms)
        return cublas.cublas_candidates(m, n, k, sms, generation(hw),
                                        int(hw.sm.max_shared_memory_per_cta_KiB * 1024))
    if kernel in (trtllm.TRTLLM_WO_GEMV, trtllm.TRTLLM_FPAINTB):
        # TensorRT-LLM dispatches by SM version (sm_90 exactly runs its Hopper kernels; sm_100 the
        # sm_80 CUTLASS tiles and its own GEMV layout), not by mpsim's candidate family
        from mpsim.engines import architecture  # the engine files' names (engines import the rooms)

        sm = architecture(hw) if isinstance(hw, GpuSpec) else "hopper"
        if kernel == trtllm.TRTLLM_WO_GEMV:
            return [trtllm.trtllm_wo_config(m, n, k, bits, sm)]
        return wo_candidates(kernel, m, n, k, bits, group_size or k, sms, sm)
    if kernel in SCALED_CANDIDATES:
        gen = generation(hw) if isinstance(hw, GpuSpec) else "hopper"
        try:
            return SCALED_CANDIDATES[kernel](kernel, m, n, k, sms, gen)
        except ValueError as exc:
            raise MpsimInputError(f"best config on {hw.name}: {exc}") from None
    if kernel in AUTOTUNED_CANDIDATES:
        try:
            return AUTOTUNED_CANDIDATES[kernel](m, n, k, bits, group_size or k, sms)
        except ValueError as exc:
            raise MpsimInputError(f"best config: {exc}") from None
    # by generation (mpsim.sim.gpu.arch: Blackwell runs Hopper's set, a labelled assumption)
    arch = candidate_family(hw) if isinstance(hw, GpuSpec) else "hopper"
    if kernel in WO_GEMM_KERNELS:
        try:
            return wo_candidates(kernel, m, n, k, bits, group_size or k, sms, arch)
        except ValueError as exc:
            raise MpsimInputError(f"best config: {exc}") from None
    if kernel is not None:
        raise MpsimInputError(f"best config: unknown GEMM kernel {kernel!r}")
    return lc.gemm_candidates(m, n, k, w_format, bits, group_size, arch)


def best_gemm_row(m: int, n: int, k: int, w_format: str = "fp16", bits: int = 16,
                  group_size: int | None = None, bias: bool = False, *, hw: HardwareSpec,
                  kernel: str | None = None, params: SimParams = DEFAULT_PARAMS) -> BestConfig:
    """The fastest config of one GEMM launch on `hw` (mpsim's kernels, or `kernel`'s candidates)."""
    probe = gemm_row(m, n, k, w_format, bits, group_size, bias, kernel=kernel)
    fmt, bits_, group = probe["w_format"], int(probe["w_bits"]), probe["group_size"]
    cands = gemm_candidate_configs(m, n, k, fmt, bits_, group, hw, kernel)
    build = partial(gemm_row, m, n, k, fmt, bits_, group, bias, kernel=kernel,
                    sms=hw.compute_units)
    return best_config(lambda c: build(config=c), cands, hw, params)


def with_best_gemm_configs(trace: Trace, hw: HardwareSpec,
                           params: SimParams = DEFAULT_PARAMS) -> tuple[Trace, dict[str, Any]]:
    """The trace with every GEMM launch of mpsim's kernels given the config the simulator predicts
    fastest on `hw` (one search per distinct shape and format), and facts about the search. Shapes,
    formats and the analytic accounting are unchanged; only kernel, grid and config move. The fp8 /
    fp4 GEMMs (issue 26) keep their launcher's one config: those kernels have no candidate set."""
    rows = trace.rows
    gemm = ((rows["op"] == "gemm") & ~rows["w_format"].isin(FLOAT_FORMATS)
            & rows["kernel"].astype(str).str.match(r"^gem[mv]_")).to_numpy()
    return _retuned(trace, hw, params, gemm, own=True)


def autotuned_row(row: Row, hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS,
                  memo: dict[tuple[Any, ...], lc.LaunchConfig] | None = None) -> Row:
    """`row` with the config of its autotuned library kernel (AUTOTUNED_KERNELS) the simulator
    predicts fastest on `hw`, in the row's own form (grid and config as lists and dicts, or as the
    trace's JSON text); other rows, and every row on an NPU, as they are. `memo`: searches by
    (kernel, shape, format), shared across calls."""
    kernel = str(row.get("kernel"))
    if kernel not in AUTOTUNED_KERNELS or not isinstance(hw, GpuSpec):
        return row
    group = row.get("group_size")
    key = (kernel, int(row["m"]), int(row["n"]), int(row["k"]), str(row["w_format"]),
           int(row["w_bits"]), None if group is None else int(group), bool(row.get("bias")))
    memo = {} if memo is None else memo
    if key not in memo:
        memo[key] = best_gemm_row(*key[1:], hw=hw, kernel=kernel, params=params).config
    cfg = memo[key]
    text = isinstance(row.get("config"), str)
    grid, config = list(cfg.grid), cfg.config_dict()
    return {**row, "kernel": cfg.kernel, "grid": json.dumps(grid) if text else grid,
            "config": json.dumps(config, sort_keys=True) if text else config}


def with_autotuned_configs(trace: Trace, hw: HardwareSpec,
                           params: SimParams = DEFAULT_PARAMS) -> tuple[Trace, dict[str, Any]]:
    """The trace with every launch of an autotuned library kernel (AUTOTUNED_KERNELS: GemLite's)
    given the candidate of its autotuner the simulator predicts fastest on `hw`: what the library's
    run-time autotuning picks, by the model. Other rows keep their configs."""
    gemm = trace.rows["kernel"].astype(str).isin(AUTOTUNED_KERNELS).to_numpy()
    return _retuned(trace, hw, params, gemm, own=False)


def _retuned(trace: Trace, hw: HardwareSpec, params: SimParams, gemm: Any,
             own: bool) -> tuple[Trace, dict[str, Any]]:
    """`trace` with the rows under `gemm` searched (mpsim's candidates when `own`, else each row's
    kernel's), one search per distinct kernel, shape and format."""
    rows = trace.rows.copy()
    keys = ["kernel", "m", "n", "k", "w_format", "w_bits", "group_size", "bias"]
    start = time.perf_counter()
    sub = rows.loc[gemm, keys]
    if own:  # mpsim's kernels: the search may move a GEMV to the tiled GEMM and back
        sub = sub.assign(kernel="")
    codes = sub.groupby(keys, dropna=False, sort=False, observed=True).ngroup().to_numpy()
    runs = 0
    chosen: list[Row] = []
    for code in range(int(codes.max()) + 1 if len(codes) else 0):
        first = sub.iloc[int((codes == code).argmax())]
        kernel, m, n, k, fmt, bits, group, bias = (None if pd.isna(v) else v for v in first)
        best = best_gemm_row(int(m or 0), int(n or 0), int(k or 0), str(fmt), int(bits or 16),
                             None if group is None else int(group), bool(bias), hw=hw,
                             kernel=None if own else str(kernel), params=params)
        chosen.append(best.row)
        runs += best.simulated
    for col in ("kernel", "grid", "config"):  # text columns are categorical: new values, new categories
        values = rows[col].astype(object).to_numpy(copy=True)
        values[gemm] = [chosen[c][col] for c in codes]
        rows[col] = pd.Series(values, index=rows.index).astype("category")
    rows = coerce_types(rows, "model-guided configs")  # canonical storage (sorted categories)
    what = "best" if own else "autotuned"
    env = {**trace.meta.environment, "launch_configs": f"{what} for {hw.name} (model-guided)"}
    meta = dataclasses.replace(trace.meta, environment=env)
    info = {"shapes": len(chosen), "simulated": runs, "wall_s": time.perf_counter() - start}
    return Trace(rows, meta), info
