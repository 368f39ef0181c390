"""Malformed hardware files fail with the file, the dotted key and the reason."""

from __future__ import annotations

import copy
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.schema import GpuSpec, NpuSpec, UnsupportedDtypeError


def shipped_dict(name: str) -> dict[str, Any]:
    text = resources.files("mpsim.hw_models").joinpath(f"{name}.yaml").read_text()
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def write(tmp_path: Path, data: object, name: str = "broken-device.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def expect_error(path: Path, *fragments: str) -> str:
    with pytest.raises(HardwareFileError) as info:
        load_hardware(str(path))
    message = str(info.value)
    assert path.name in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def _delete(key: str) -> Callable[[dict[str, Any]], None]:
    block, leaf = key.split(".")
    return lambda d: d[block].pop(leaf)


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    block, leaf = key.split(".")
    return lambda d: d[block].__setitem__(leaf, value)


GPU_CASES = [
    ("missing key", _delete("dram.bandwidth_GBps"), ["dram.bandwidth_GBps", "missing"]),
    ("negative bandwidth", _set("dram.bandwidth_GBps", -3), ["dram.bandwidth_GBps", "> 0", "-3"]),
    ("zero SMs", _set("compute.sm_count", 0), ["compute.sm_count", "> 0", "0"]),
    ("float SMs", _set("compute.sm_count", 132.5), ["compute.sm_count", "must be int"]),
    ("string number", _set("l2.size_MiB", "50MB"), ["l2.size_MiB", "must be float"]),
    ("bool number", _set("l2.latency_ns", True), ["l2.latency_ns", "must be float"]),
    ("typo key", _set("dram.bandwith_GBps", 1.0), ["dram.bandwith_GBps", "unknown key",
                                                     "bandwidth_GBps"]),
    ("fraction > 1", _set("dram.achievable_bandwidth_fraction", 1.5),
     ["dram.achievable_bandwidth_fraction", "<= 1.0"]),
    ("unknown source", _set("l2.source", "no-such-paper"), ["l2.source", "no-such-paper",
                                                             "unknown source id"]),
    ("unknown key source", _set("l2.key_sources", {"size_MiB": "nope"}),
     ["l2.key_sources.size_MiB", "nope"]),
    ("key source of a non-key", _set("l2.key_sources", {"colour": "cuda-guide-cc90"}),
     ["l2.key_sources.colour", "unknown key"]),
    ("unknown dtype", _set("tensor_core.dense_peak_TFLOPs", {"fp16": 1.0, "fp5": 2.0}),
     ["tensor_core.dense_peak_TFLOPs.fp5", "unknown key"]),
    ("dtype sets differ", _set("tensor_core.dense_peak_TFLOPs", {"fp16": 989.4}),
     ["tensor_core.flops_per_clock_per_SM", "same dtypes"]),
    ("block not mapping", lambda d: d.__setitem__("l2", [1, 2]), ["l2", "must be a mapping"]),
    ("bad source kind", lambda d: d["sources"][0].__setitem__("kind", "rumour"),
     ["sources[0].kind", "rumour"]),
    ("bad kind", lambda d: d.__setitem__("kind", "tpu"), ["kind", "tpu", "gpu", "npu"]),
    ("missing kind", lambda d: d.pop("kind"), ["kind", "missing"]),
    ("duplicate source", lambda d: d["sources"].append(copy.deepcopy(d["sources"][0])),
     ["id", "duplicate"]),
    ("boost below base", _set("compute.boost_clock_MHz", 100.0), ["compute.boost_clock_MHz"]),
]


@pytest.mark.parametrize(("label", "mutate", "fragments"), GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_malformed_gpu_file(tmp_path: Path, label: str, mutate: Callable, fragments: list) -> None:
    data = shipped_dict("h100-sxm")
    mutate(data)
    expect_error(write(tmp_path, data), *fragments)


def test_npu_missing_decoder_width(tmp_path: Path) -> None:
    data = shipped_dict("npu-llm")
    del data["weight_decoder"]["weights_per_cycle"][3]
    expect_error(write(tmp_path, data), "weight_decoder.weights_per_cycle.3", "missing")


def test_npu_nested_buffer_key(tmp_path: Path) -> None:
    data = shipped_dict("npu-edge")
    data["sram"]["weight_buffer"]["size_MiB"] = -1
    expect_error(write(tmp_path, data), "sram.weight_buffer.size_MiB", "> 0")


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    expect_error(path, "(top level)", "mapping")


@pytest.mark.parametrize("cut", [0.3, 0.6])
def test_truncated_yaml(tmp_path: Path, cut: float) -> None:
    text = resources.files("mpsim.hw_models").joinpath("h100-sxm.yaml").read_text()
    path = tmp_path / "truncated.yaml"
    path.write_text(text[: int(len(text) * cut)])
    with pytest.raises(HardwareFileError) as info:
        load_hardware(str(path))
    assert "truncated.yaml" in str(info.value)


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nkind: gpu\ncompute: {sm_count: [1, 2\n")
    expect_error(path, "line", "invalid YAML")


def test_unreadable_path(tmp_path: Path) -> None:
    expect_error(tmp_path / "absent.yaml", "cannot read")


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(HardwareFileError) as info:
        load_hardware("h300-sxm")
    message = str(info.value)
    assert "h300-sxm" in message
    for name in list_hardware():
        assert name in message


def test_user_path_round_trip(tmp_path: Path) -> None:
    data = shipped_dict("h200-sxm")
    data["name"] = "my-h200-overclocked"
    data["dram"]["bandwidth_GBps"] = 5000
    spec = load_hardware(str(write(tmp_path, data, "mine.yaml")))
    assert isinstance(spec, GpuSpec)
    assert spec.name == "my-h200-overclocked"
    assert spec.dram_bandwidth_Bps() == 5000e9


def test_spec_is_frozen() -> None:
    spec = load_hardware("h100-sxm")
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["h100-sxm", "npu-llm"])
def test_unsupported_dtype_names_supported(name: str) -> None:
    spec = load_hardware(name)
    with pytest.raises(UnsupportedDtypeError) as info:
        spec.matrix_peak_flops("fp3")
    assert "fp3" in str(info.value) and "fp16" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_npu_kind_builds_npu_spec() -> None:
    assert isinstance(load_hardware("npu-llm"), NpuSpec)
