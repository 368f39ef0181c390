"""The one settings type of calibration (`Constants`, both forms of `mpsim calibrate`), and how
it applies to a hardware file, the simulator's constants and the protocol file.

- `bandwidth_fraction`: the share of the datasheet DRAM bandwidth a streaming kernel reaches
  (dram.achievable_bandwidth_fraction);
- `l2_bytes_per_clock_per_sm`: one SM's L2 load port in bytes per clock at the datasheet tensor
  clock (SimParams.port_bytes_per_clk; the chip's L2 bandwidth is SMs x this); the same L2 slice
  design gives the same number on H100 and H200; on Blackwell the port of thread loads and the
  chip's L2 (its TMA copies' wider port is SimParams.port_bytes_per_clk_blackwell, a constant a
  calibration sets by name like any other);
- `dequant_scale`: a factor on the dequantization work per weight (> 1: slower), the same meaning
  everywhere: TensorRT-LLM's weight-only GEMV's lane-ops per int4 / int8 weight (SimParams trtllm.wo_*),
  and the rate the work runs at divided by it (a GPU's int32 ops per clock per SM, which mpsim's
  own kernels' SASS-counted dequantization runs at; an NPU's weight decoder, every width);
- `protocol_us`: each fitted protocol's fixed cost per measured call (mpsim/sim/protocols.py);
- `params`: other simulator constants (SimParams fields) fitted jointly by name
  (`mpsim calibrate --against FILE --fit-params NAMES`, analysis/validation/fit_params.py);
- `launch_overhead_us` (the trace form, calibrate_trace.py): a GPU's graph gap per kernel (the
  hardware file's launch.overhead_us, mpsim/sim/protocols.py `for_device`) or an NPU's dispatch
  cost (dispatch.overhead_us); None keeps the file's.

Applied to another device, only that device's datasheet numbers differ: SMs, clocks, DRAM
bandwidth and sizes come from its own hardware file, the constants from the calibration. A
calibration file is plain YAML (kind `mpsim-calibration`), read with
mpsim.hw_models.yaml_load.safe_yaml (safe, no duplicate keys) and checked.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec, Launch, NpuSpec
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.sim.gpu.rates import bw_fraction, gpu_rates
from mpsim.sim.params import DEFAULT_PARAMS, LEGACY_NAMES, SimParams, float_param_names, with_params
from mpsim.sim.protocols import ProtocolFile, shipped
from mpsim.traces.atomic import write_text_atomic

KIND = "mpsim-calibration"
# The simulator constants a calibration may set by name: SimParams' float fields and each library
# room's as `<library>.<field>` (the bandwidth fraction and the L2 port are the named constants above).
FITTABLE_PARAMS = tuple(n for n in float_param_names() if n not in ("bw_frac", "port_bytes_per_clk"))


@dataclass(frozen=True)
class Constants:
    bandwidth_fraction: float
    l2_bytes_per_clock_per_sm: float | None = None  # None: the simulator's (not calibrated)
    dequant_scale: float = 1.0                      # factor on dequantization work per weight
    protocol_us: dict[str, float] = field(default_factory=dict)
    params: dict[str, float] = field(default_factory=dict)  # SimParams fields, by name
    launch_overhead_us: float | None = None         # GPU graph gap / NPU dispatch; None: the file's


def _gpu(hw: HardwareSpec) -> GpuSpec:
    if not isinstance(hw, GpuSpec):
        raise MpsimInputError(f"{hw.name}: calibration against measured tables needs a GPU hardware file")
    return hw


def constants_of(hw: HardwareSpec, table: ProtocolFile | None = None,
                 params: SimParams = DEFAULT_PARAMS) -> Constants:
    """The constants the simulator, a hardware file's overrides and the protocol file ship with."""
    gpu = _gpu(hw)
    table = table or shipped()
    return Constants(bw_fraction(gpu, params), params.port_bytes_per_clk, 1.0,
                     {k: p.per_call_us for k, p in table.protocols.items()})


def trace_constants_of(hw: HardwareSpec, params: SimParams = DEFAULT_PARAMS) -> Constants:
    """What the trace form fits, as `hw` and the simulator ship them (GPU or NPU)."""
    if isinstance(hw, GpuSpec):
        return Constants(bw_fraction(hw, params), dequant_scale=1.0,
                         launch_overhead_us=gpu_rates(hw, params).launch_cost.per_launch_us)
    return Constants(hw.dram.achievable_bandwidth_fraction, dequant_scale=1.0,
                     launch_overhead_us=hw.dispatch.overhead_us)


def apply_hw(hw: HardwareSpec, c: Constants) -> HardwareSpec:
    """`hw` with the constants applied, its datasheet numbers kept: the bandwidth fraction, the
    dequantization rate divided by dequant_scale, the launch (GPU) or dispatch (NPU) overhead when
    set; with an L2 port (a simulator constant, apply_params) a file's own L2 bandwidth override is
    dropped."""
    dram = dataclasses.replace(hw.dram, achievable_bandwidth_fraction=c.bandwidth_fraction)
    o = c.launch_overhead_us
    if isinstance(hw, GpuSpec):
        cuda = dataclasses.replace(hw.cuda_core, int32_ops_per_clock_per_SM=hw.cuda_core
                                   .int32_ops_per_clock_per_SM / c.dequant_scale)
        l2 = hw.l2 if c.l2_bytes_per_clock_per_sm is None else dataclasses.replace(hw.l2, bandwidth_GBps=None)
        launch = hw.launch if o is None else (
            Launch(source=hw.dram.source, overhead_us=o) if hw.launch is None
            else dataclasses.replace(hw.launch, overhead_us=o))
        return dataclasses.replace(hw, dram=dram, cuda_core=cuda, l2=l2, launch=launch)
    if not isinstance(hw, NpuSpec):
        raise MpsimInputError(f"{hw.name}: calibration needs a GPU or NPU hardware file")
    dec = hw.weight_decoder
    anyprec = dec.anyprec_weights_per_cycle
    dec = dataclasses.replace(
        dec, weights_per_cycle={b: r / c.dequant_scale for b, r in dec.weights_per_cycle.items()},
        anyprec_weights_per_cycle=None if anyprec is None
        else {b: r / c.dequant_scale for b, r in anyprec.items()})
    dispatch = hw.dispatch if o is None else dataclasses.replace(hw.dispatch, overhead_us=o)
    return dataclasses.replace(hw, dram=dram, weight_decoder=dec, dispatch=dispatch)


def apply_params(params: SimParams, c: Constants) -> SimParams:
    s = c.dequant_scale
    params = with_params(params, c.params)
    port = params.port_bytes_per_clk if c.l2_bytes_per_clock_per_sm is None else c.l2_bytes_per_clock_per_sm
    return dataclasses.replace(params, bw_frac=c.bandwidth_fraction, port_bytes_per_clk=port,
                               trtllm=dataclasses.replace(params.trtllm,
                                                          wo_ops_dq4=params.trtllm.wo_ops_dq4 * s,
                                                          wo_ops_dq8=params.trtllm.wo_ops_dq8 * s))


def apply_protocols(table: ProtocolFile, c: Constants) -> ProtocolFile:
    protocols = {k: dataclasses.replace(p, per_call_us=c.protocol_us.get(k, p.per_call_us))
                 for k, p in table.protocols.items()}
    return ProtocolFile(protocols, table.scopes, table.sources)


def constants_dict(c: Constants, params: SimParams) -> dict[str, Any]:
    p = apply_params(params, c)
    return {
        "dram.achievable_bandwidth_fraction": round(c.bandwidth_fraction, 4),
        "l2.bytes_per_clock_per_SM": round(p.port_bytes_per_clk, 3),
        "dequant_scale": round(c.dequant_scale, 4),
        "dequant_ops_per_weight": {"trtllm_wo_int4": round(p.trtllm.wo_ops_dq4, 3),
                                   "trtllm_wo_int8": round(p.trtllm.wo_ops_dq8, 3)},
        "protocols_per_call_us": {k: round(v, 3) for k, v in sorted(c.protocol_us.items())},
        **({"sim_params": {k: float(f"{v:.6g}") for k, v in sorted(c.params.items())}}
           if c.params else {}),
    }


def write_calibration(path: str | Path, c: Constants, params: SimParams, fitted_on: dict[str, Any],
                      errors: dict[str, Any]) -> Path:
    data = {"kind": KIND, "date": datetime.date.today().isoformat(), "fitted_on": fitted_on,
            "constants": constants_dict(c, params), "errors": errors}
    text = yaml.safe_dump(data, sort_keys=False)
    read_calibration_text(text, str(path))  # what we write must read back
    return write_text_atomic(text, path)


def read_calibration_text(text: str, where: str) -> Constants:
    try:
        data = safe_yaml(text)
    except YAMLError as exc:
        raise MpsimInputError(f"{where}: {yaml_problem(exc)}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise MpsimInputError(f"{where}: not an mpsim calibration file (kind: {KIND})")
    try:
        k = data["constants"]
        c = Constants(float(k["dram.achievable_bandwidth_fraction"]),
                      float(k["l2.bytes_per_clock_per_SM"]), float(k.get("dequant_scale", 1.0)),
                      {str(p): float(v) for p, v in (k.get("protocols_per_call_us") or {}).items()},
                      {LEGACY_NAMES.get(str(p), str(p)): float(v)  # files from before the rooms
                       for p, v in (k.get("sim_params") or {}).items()})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MpsimInputError(f"{where}: constants: {exc!r}") from None
    if not (0 < c.bandwidth_fraction <= 1 and (c.l2_bytes_per_clock_per_sm or 0) > 0
            and c.dequant_scale > 0):
        raise MpsimInputError(f"{where}: constants out of range: {c}")
    unknown = sorted(set(c.protocol_us) - set(shipped().protocols))
    if unknown or any(v < 0 for v in c.protocol_us.values()):
        raise MpsimInputError(f"{where}: protocols_per_call_us: unknown {unknown} or negative")
    bad = [k for k, v in c.params.items() if k not in FITTABLE_PARAMS or not math.isfinite(v) or v <= 0]
    if bad:
        raise MpsimInputError(f"{where}: sim_params {bad}: expected simulator constants (SimParams "
                              f"float fields: {', '.join(FITTABLE_PARAMS)}) with finite values > 0")
    return c


def read_calibration(path: str | Path) -> Constants:
    path = Path(path)
    if not path.is_file():
        raise MpsimInputError(f"{path}: no such calibration file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MpsimInputError(f"{path}: not a text (UTF-8) file: byte {exc.start}: expected a "
                              "calibration file (mpsim calibrate --against)") from None
    return read_calibration_text(text, str(path))
