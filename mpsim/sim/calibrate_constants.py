"""The named, device-independent constants `mpsim calibrate --against` fits, and how they apply.

- `bandwidth_fraction`: the share of the datasheet DRAM bandwidth a streaming kernel reaches
  (dram.achievable_bandwidth_fraction);
- `l2_bytes_per_clock_per_sm`: one SM's L2 load port in bytes per clock at the datasheet tensor
  clock (SimParams.port_bytes_per_clk; the chip's L2 bandwidth is SMs x this); the same L2 slice
  design gives the same number on H100 and H200;
- `dequant_scale`: a factor on the dequantization work per weight of SimParams (TensorRT-LLM's
  weight-only GEMV: lane-ops per int4 / int8 weight; mpsim's own kernels take theirs from SASS,
  mpsim/sim/gpu/sass.py, and are not scaled);
- `protocol_us`: each fitted protocol's fixed cost per measured call (mpsim/sim/protocols.py).

Applied to another device, only that device's datasheet numbers differ: SMs, clocks, DRAM
bandwidth and sizes come from its own hardware file, the constants from the calibration. A
calibration file is plain YAML (kind `mpsim-calibration`), read with
mpsim.hw_models.yaml_load.safe_yaml (safe, no duplicate keys) and checked.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem
from mpsim.sim.gpu.rates import bw_fraction
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import ProtocolFile, shipped
from mpsim.traces.atomic import write_text_atomic

KIND = "mpsim-calibration"


@dataclass(frozen=True)
class Constants:
    bandwidth_fraction: float
    l2_bytes_per_clock_per_sm: float
    dequant_scale: float = 1.0
    protocol_us: dict[str, float] = field(default_factory=dict)


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


def apply_hw(hw: HardwareSpec, c: Constants) -> GpuSpec:
    """`hw` with the constants' bandwidth fraction (its datasheet numbers kept); the L2 port is a
    simulator constant (apply_params), and a file's own L2 bandwidth override is dropped."""
    gpu = _gpu(hw)
    return dataclasses.replace(
        gpu, dram=dataclasses.replace(gpu.dram, achievable_bandwidth_fraction=c.bandwidth_fraction),
        l2=dataclasses.replace(gpu.l2, bandwidth_GBps=None))


def apply_params(params: SimParams, c: Constants) -> SimParams:
    s = c.dequant_scale
    return dataclasses.replace(params, bw_frac=c.bandwidth_fraction,
                               port_bytes_per_clk=c.l2_bytes_per_clock_per_sm,
                               wo_ops_dq4=params.wo_ops_dq4 * s, wo_ops_dq8=params.wo_ops_dq8 * s)


def apply_protocols(table: ProtocolFile, c: Constants) -> ProtocolFile:
    protocols = {k: dataclasses.replace(p, per_call_us=c.protocol_us.get(k, p.per_call_us))
                 for k, p in table.protocols.items()}
    return ProtocolFile(protocols, table.scopes, table.sources)


def constants_dict(c: Constants, params: SimParams) -> dict[str, Any]:
    p = apply_params(params, c)
    return {
        "dram.achievable_bandwidth_fraction": round(c.bandwidth_fraction, 4),
        "l2.bytes_per_clock_per_SM": round(c.l2_bytes_per_clock_per_sm, 3),
        "dequant_scale": round(c.dequant_scale, 4),
        "dequant_ops_per_weight": {"trtllm_wo_int4": round(p.wo_ops_dq4, 3),
                                   "trtllm_wo_int8": round(p.wo_ops_dq8, 3)},
        "protocols_per_call_us": {k: round(v, 3) for k, v in sorted(c.protocol_us.items())},
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
                      {str(p): float(v) for p, v in (k.get("protocols_per_call_us") or {}).items()})
    except (KeyError, TypeError, ValueError) as exc:
        raise MpsimInputError(f"{where}: constants: {exc!r}") from None
    if not 0 < c.bandwidth_fraction <= 1 or c.l2_bytes_per_clock_per_sm <= 0 or c.dequant_scale <= 0:
        raise MpsimInputError(f"{where}: constants out of range: {c}")
    unknown = sorted(set(c.protocol_us) - set(shipped().protocols))
    if unknown or any(v < 0 for v in c.protocol_us.values()):
        raise MpsimInputError(f"{where}: protocols_per_call_us: unknown {unknown} or negative")
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
