"""The unit of sweep work: synthesize one group's trace, replay it on each pending point, save each point.

Runs inside a worker (a local process, a Dask worker, or the calling process). Every point is written
to its own file the moment it is done, so an interruption loses at most the points in flight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mpsim.analysis.sweep.spec import Group, Point
from mpsim.analysis.sweep.store import PointStore
from mpsim.engines import DEFAULT_ENGINE, MPSIM_KERNELS, EngineChoice
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuSpec
from mpsim.library import AUTOTUNED_KERNELS
from mpsim.memory import device_memory_bytes, point_bits, point_memory
from mpsim.models import ModelSpec
from mpsim.policy import Policy, parse_policy
from mpsim.sim import SimResult, simulate
from mpsim.sim.best_config import with_autotuned_configs
from mpsim.sim.energy import energy_breakdown
from mpsim.synth import synthesize
from mpsim.traces.trace import Trace
from mpsim.workload import Workload

# Column order of the results table (speedup_vs_fp16 is added when points are merged).
COLUMNS = (
    "key", "model", "policy", "engine", "tp", "pp", "micro_batches", "hw", "hw_kind", "perf_model",
    "prompt_len", "gen_len", "batch",
    "ttft_s", "tpot_s", "tpot_p50_s", "tpot_p99_s", "total_s", "lower_bound_s", "tokens_per_s",
    "decode_tokens_per_s", "weights_bytes", "kv_cache_bytes", "peak_activation_bytes", "memory_bytes",
    "device_memory_bytes", "hw_memory_bytes", "fits_in_memory", "weight_bits_per_param", "prefill_bits",
    "avg_bits_pmpd", "avg_bits_mean", "kv_bits", "launches", "energy_j", "j_per_token", "j_per_prompt_token",
    "avg_power_w", "decode_dram_j_per_token", "bubble_fraction",
)


@dataclass(frozen=True)
class GroupTask:
    """A group with only its unfinished points, and everything a worker needs to run it."""

    group: Group
    hardware: dict[str, HardwareSpec]
    out_dir: str

    @property
    def size(self) -> int:
        return len(self.group.points)


def run_group(task: GroupTask) -> list[str]:
    """Compute and save every point of the task; returns the keys written."""
    g = task.group
    policy = parse_policy(g.policy)
    traces: dict[EngineChoice, Trace] = {}  # the engine's kernels follow the GPU: one per (arch, SMs)
    tuned: dict[str, Trace] = {}  # autotuned library kernels (GemLite) follow the device itself
    common = _static_columns(g.model, policy, g.workload) | {
        "engine": g.engine, "tp": g.tp, "pp": g.pp, "micro_batches": g.micro_batches,
        "device_memory_bytes": device_memory_bytes(g.model, policy, g.workload, g.tp, g.pp)}
    store = PointStore(task.out_dir)
    written = []
    for point in g.points:
        t0 = time.perf_counter()
        hw = task.hardware[point.hw]
        choice = EngineChoice.on(g.engine, hw, g.quant_method) if g.engine != DEFAULT_ENGINE \
            else MPSIM_KERNELS
        if choice not in traces:
            traces[choice] = synthesize(g.model, policy, g.workload, engine=choice, tp=g.tp, pp=g.pp,
                                         micro_batches=g.micro_batches)
        trace = traces[choice]
        if trace.rows["kernel"].astype(str).isin(AUTOTUNED_KERNELS).any():
            if point.hw not in tuned:
                tuned[point.hw] = with_autotuned_configs(trace, hw)[0]
            trace = tuned[point.hw]
        run = simulate(trace, hw, point.perf_model)
        row = {**common, **_point_columns(point, hw, run), "launches": len(trace.rows),
               "decode_dram_j_per_token": _decode_dram_j_per_token(trace.rows, hw, run, g.workload.batch)}
        row["fits_in_memory"] = bool(row["device_memory_bytes"] <= row["hw_memory_bytes"])
        store.write_point(point.key, {c: row[c] for c in COLUMNS})
        store.log_computed(point.key, _label(g, point), time.perf_counter() - t0)
        written.append(point.key)
    return written


def _label(g: Group, p: Point) -> str:
    w = g.workload
    engine = "" if g.engine == DEFAULT_ENGINE else f" {g.engine}"
    engine += "" if (g.tp, g.pp) == (1, 1) else f" tp{g.tp} pp{g.pp}"
    engine += "" if g.micro_batches == 1 else f" mb{g.micro_batches}"
    return f"{g.model.name} {g.policy}{engine} {p.hw} {p.perf_model} p{w.prompt_len} g{w.gen_len} b{w.batch}"


def _static_columns(spec: ModelSpec, policy: Policy, wl: Workload) -> dict[str, Any]:
    mem = point_memory(spec, policy, wl)
    return {
        "model": spec.name, "policy": policy.spelling, "prompt_len": wl.prompt_len,
        "gen_len": wl.gen_len, "batch": wl.batch, "weights_bytes": mem.weights_bytes,
        "kv_cache_bytes": mem.kv_cache_bytes, "peak_activation_bytes": mem.peak_activation_bytes,
        "memory_bytes": mem.total_bytes, "weight_bits_per_param": mem.weight_bits_per_param,
        **point_bits(policy, wl).as_dict(),
    }


def _point_columns(point: Point, hw: HardwareSpec, run: SimResult) -> dict[str, Any]:
    s = run.summary
    return {
        "key": point.key, "hw": point.hw, "hw_kind": hw.kind, "perf_model": point.perf_model,
        "ttft_s": s.ttft_s, "tpot_s": s.tpot_mean_s, "tpot_p50_s": s.tpot_p50_s,
        "tpot_p99_s": s.tpot_p99_s, "total_s": s.total_s,
        "lower_bound_s": float(run.column("t_lower_s").sum()),
        "tokens_per_s": s.tokens_per_s, "decode_tokens_per_s": s.decode_tokens_per_s,
        "hw_memory_bytes": int(_memory_gb(hw) * 1e9), "energy_j": s.energy_j,
        "j_per_token": s.j_per_token, "j_per_prompt_token": s.j_per_prompt_token,
        "avg_power_w": s.avg_power_w, "bubble_fraction": s.bubble_fraction,
    }


def _decode_dram_j_per_token(rows: pd.DataFrame, hw: HardwareSpec, run: SimResult,
                             batch: int) -> float:
    """The DRAM part of j_per_token (decode launches' DRAM energy per generated token)."""
    decode = (rows["phase"] == "decode").to_numpy()
    if not decode.any():
        return float("nan")
    dram = energy_breakdown(run.launches, hw, run.model)["dram"][decode].sum()
    tokens = batch * int(rows.loc[decode, "step"].nunique())
    return float(dram) / tokens


def _memory_gb(hw: HardwareSpec) -> float:
    if not isinstance(hw, GpuSpec | NpuSpec):
        raise TypeError(f"hardware {hw.name!r}: expected a GpuSpec or NpuSpec, got {type(hw).__name__}")
    return float(hw.dram.size_GB)
