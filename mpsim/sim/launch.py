"""One launch on a hardware model, in plain Python: what `mpsim op` prices.

`simulate_launch` runs one launch (a trace-row mapping) through the SimPy GPU or NPU model, with no
memo; the trace replay (mpsim/sim/replay.py) and calibration call it for every distinct launch.
`price_launch` gives one launch's LAUNCH_COLUMNS under a performance model, the numbers
`mpsim.sim.simulate` gives the one-row trace (same roofline bound, same floor, same energy;
tests/sim/test_sim_launch.py holds them equal), without pandas on a GPU, so that `mpsim op` starts
in a fraction of a second; on an NPU, whose model prices whole steps, `mpsim op` uses `simulate`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, NpuSpec
from mpsim.kernels.launch_config import DECODE_ATTENTION_KERNEL
from mpsim.sim.energy_costs import gpu_launch_dynamic_j, roofline_launch_dynamic_j, static_w
from mpsim.sim.gpu.memory import usable_l2
from mpsim.sim.gpu.rates import gpu_rates
from mpsim.sim.npu.rates import npu_rates, npu_resident_cap
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.result import BODY_PARTS, LAUNCH_COLUMNS, UNITS, LaunchOutcome, latency_part
from mpsim.sim.roofline import launch_roofline
from mpsim.traces.accounting import launch_cost
from mpsim.traces.schema import COLLECTIVE_OPS


def simulate_launch(row: Mapping[str, Any], hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS,
                    resident: float = 0.0) -> LaunchOutcome:
    """One launch (a trace-row mapping) on `hw`, with no memo; a collective row by the cost model of
    collectives on `hw`'s node (mpsim/sim/comm.py)."""
    if row["op"] in COLLECTIVE_OPS:
        from mpsim.sim.comm import collective_outcome

        return collective_outcome(row, hw)
    if isinstance(hw, GpuSpec):
        # the SimPy GPU model (simpy, the CTA and work models: ~0.07 s of imports) loads when a launch
        # is first simulated: a replay whose launches all come from the memo never needs it
        from mpsim.sim.gpu.model import simulate_gpu_launch

        return simulate_gpu_launch(row, hw, params, resident)
    if isinstance(hw, NpuSpec):
        # the NPU model (its step model, numpy) loads only when an NPU launch is simulated
        from mpsim.sim.npu.model import simulate_npu_launch

        return simulate_npu_launch(row, hw, params, resident)
    raise MpsimInputError(f"no simulator for hardware of kind {hw.kind!r}; expected gpu or npu")


def resident_cap(hw: HardwareSpec, params: SimParams) -> float:
    """Bytes of a launch's output that stay resident for the next one (the GPU's usable L2, the
    NPU's activation SRAM)."""
    if isinstance(hw, NpuSpec):
        return npu_resident_cap(npu_rates(hw))
    return usable_l2(gpu_rates(hw, params), params) if isinstance(hw, GpuSpec) else 0.0


ONE_LAUNCH_MODELS = ("sim", "roofline")
REL = 1e-9  # float noise of summing cycles in different orders


class BelowBoundError(RuntimeError):
    """A simulated launch beat its residency-aware roofline bound: a bug in a performance model."""


def check_bound(time_s: float, lower: float, what: Callable[[], str]) -> None:
    """One launch's simulated time against its bound (`what` names the launch)."""
    if time_s < lower * (1 - REL):
        raise BelowBoundError(f"{what()}: simulated {time_s * 1e6:.4f} us is below its "
                              f"residency-aware roofline bound {lower * 1e6:.4f} us")


def price_launch(row: Mapping[str, Any], hw: HardwareSpec, model: str = "sim",
                 params: SimParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """One launch, alone (nothing resident from a previous launch), under `model`: its per-launch
    columns (mpsim.sim.result.LAUNCH_COLUMNS) as plain values, starting at 0."""
    if model == "sim" and isinstance(hw, NpuSpec):
        raise MpsimInputError(f"{hw.name}: the NPU model prices whole steps (operators overlap across "
                              "launches); price one launch as a one-row trace with mpsim.sim.simulate")
    bound = launch_roofline(row, hw, resident=True)  # the bound every result carries (replay.py)
    if model == "sim":
        per = _sim_columns(simulate_launch(bucketed(row), hw, params, 0.0))
    elif model == "roofline":  # replay_roofline of one row: every analytic byte from DRAM
        plain = launch_roofline(row, hw)
        t = plain["t_lower_s"]
        per = {"kernel_s": t, "overhead_s": 0.0, "cycles": t * hw.clock_MHz * 1e6,
               "bytes_dram": float(row["bytes_read"] + row["bytes_written"]), "bytes_l2": math.nan,
               "bytes_sram": math.nan, "bound": plain["bound"], "ctas_per_sm": math.nan,
               "waves": math.nan, **{f"util_{u}": math.nan for u in UNITS},
               "util_dram": plain["t_mem_s"] / t if t > 0 else 0.0,
               **{f"part_{p}_s": t if p == plain["bound"] else 0.0 for p in BODY_PARTS}}
    else:
        raise MpsimInputError(f"performance model {model!r} prices whole traces only "
                              f"(one launch: {', '.join(ONE_LAUNCH_MODELS)}); use mpsim.sim.simulate")
    raw = per["kernel_s"] + per["overhead_s"]
    if isinstance(hw, GpuSpec):  # as replay.LaunchTable: below the bound is a model error, no clamp
        check_bound(raw, bound["t_lower_s"], lambda: f"launch {row.get('launch_id', 0)} "
                    f"({row['kernel']}, op {row['op']}) on {hw.name}")
        time_s = raw
    else:
        time_s = max(raw, bound["t_lower_s"])
    if model == "sim":
        dynamic = gpu_launch_dynamic_j(per, hw, params) if isinstance(hw, GpuSpec) else math.nan
    else:
        dynamic = roofline_launch_dynamic_j(row, hw)
    out = {"launch_id": row.get("launch_id", 0), "start_s": 0.0, "end_s": time_s, "time_s": time_s,
           **per, "t_math_s": bound["t_math_s"], "t_mem_s": bound["t_mem_s"],
           "t_lower_s": bound["t_lower_s"], "busy_start_s": 0.0, "busy_end_s": time_s,
           "energy_j": dynamic + static_w(hw) * time_s, "part_launch_s": per["overhead_s"]}
    out["part_latency_s"] = latency_part(time_s, [per[f"part_{p}_s"] for p in BODY_PARTS],
                                         per["overhead_s"])
    return {c: out[c] for c in LAUNCH_COLUMNS}


def bucketed(row: Mapping[str, Any]) -> dict[str, Any]:
    """The launch the memo simulates for `row`: decode attention's kv_len and per-sequence kv_tokens
    rounded up to whole KV tiles, its accounting re-derived (keys.bucketed_kv and keys.rep_row, for
    one row)."""
    out = dict(row)
    if row["kernel"] == DECODE_ATTENTION_KERNEL:
        tile = int(json.loads(row["config"]).get("block_n") or 1)
        batch, kv = int(row["batch"]), int(row["kv_len"])
        tokens = row.get("kv_tokens")
        mean = -(-(batch * kv if tokens is None else int(tokens)) // batch)  # per sequence, rounded up
        out["kv_len"] = -(-kv // tile) * tile
        out["kv_tokens"] = batch * (-(-mean // tile) * tile)
        cost = launch_cost(out)
        out.update(flops=cost.flops, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written)
    return out


def _sim_columns(o: LaunchOutcome) -> dict[str, Any]:
    """replay._broadcast of one outcome."""
    return {"kernel_s": o.kernel_s, "overhead_s": o.overhead_s, "cycles": o.cycles,
            "bytes_dram": o.bytes_dram, "bytes_l2": o.bytes_l2, "bytes_sram": o.bytes_sram,
            "bound": o.bound, "ctas_per_sm": o.ctas_per_sm, "waves": o.waves,
            **{f"util_{u}": float(o.util.get(u, math.nan)) for u in UNITS},
            **{f"part_{p}_s": float(o.parts.get(p, 0.0)) for p in BODY_PARTS}}
