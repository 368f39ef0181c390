"""Write a calibrated copy of a hardware file: the fitted knobs, with a `calibration` source.

The copy keeps every other number and source of the original; the fitted keys point (through
`key_sources`) at a new source of kind `calibration` naming the trace, the date and the errors. The
text is validated with the same loader as every hardware file before it is written.
"""

from __future__ import annotations

import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from mpsim.analysis.validation.calibrate_trace import CalibrationResult
from mpsim.analysis.validation.constants import Constants
from mpsim.hw_models.loader import list_hardware, parse_hardware
from mpsim.hw_models.yaml_load import safe_yaml
from mpsim.traces.atomic import write_text_atomic


def hardware_text(name_or_path: str) -> str:
    """The YAML text of a shipped device (by name) or of a user's file (by path)."""
    if name_or_path in list_hardware():
        return resources.files("mpsim.hw_models").joinpath(f"{name_or_path}.yaml").read_text("utf-8")
    return Path(name_or_path).read_text(encoding="utf-8")


def _point(block: dict[str, Any], key: str, source: str) -> None:
    block.setdefault("key_sources", {})[key] = source


def calibrated_yaml(text: str, k: Constants, citation: str, name: str) -> str:
    data = safe_yaml(text)
    source = f"calibration-{datetime.date.today().isoformat()}"
    data["sources"] = [s for s in data["sources"] if s.get("id") != source]
    data["sources"].append({"id": source, "kind": "calibration", "citation": citation})
    data["name"] = name
    data["description"] = f"{data['description']} (calibrated)"
    data["dram"]["achievable_bandwidth_fraction"] = round(k.bandwidth_fraction, 4)
    overhead = round(max(k.launch_overhead_us or 0.0, 1e-3), 3)
    _point(data["dram"], "achievable_bandwidth_fraction", source)
    if data["kind"] == "gpu":
        data.setdefault("launch", {"source": source})["overhead_us"] = overhead
        _point(data["launch"], "overhead_us", source)
        if k.dequant_scale != 1.0:
            cuda = data["cuda_core"]
            rate = cuda["int32_ops_per_clock_per_SM"] / k.dequant_scale  # work x s: rate / s
            cuda["int32_ops_per_clock_per_SM"] = round(rate, 3)
            _point(cuda, "int32_ops_per_clock_per_SM", source)
    else:
        data["dispatch"]["overhead_us"] = overhead
        _point(data["dispatch"], "overhead_us", source)
        if k.dequant_scale != 1.0:
            dec = data["weight_decoder"]
            dec["weights_per_cycle"] = {b: round(r / k.dequant_scale, 3)
                                        for b, r in dec["weights_per_cycle"].items()}
            _point(dec, "weights_per_cycle", source)
    return yaml.safe_dump(data, sort_keys=False)


def write_calibrated(hw_name_or_path: str, result: CalibrationResult, trace_name: str,
                     out: str | Path) -> Path:
    out = Path(out)
    citation = (f"calibrated against {trace_name} on {datetime.date.today().isoformat()} by mpsim "
                f"calibrate: held-out MAPE {result.test_mape_before:.1f}% -> "
                f"{result.test_mape_after:.1f}% ({result.test_launches} launches; "
                f"{result.train_launches} used to fit)")
    text = calibrated_yaml(hardware_text(hw_name_or_path), result.after, citation, out.stem)
    parse_hardware(text, str(out))
    return write_text_atomic(text, out)

