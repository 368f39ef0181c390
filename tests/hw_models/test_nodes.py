"""Node files (hw_models/nodes/*.yaml): the shipped ones load with their datasheet numbers, and a bad
file is one clear error naming the file and key."""

from __future__ import annotations

import pytest

from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.loader import list_hardware, load_hardware
from mpsim.hw_models.node import list_nodes, load_node, parse_node


def test_shipped_nodes_and_their_links() -> None:
    assert list_nodes() == ["a100-sxm-80gb", "b200-sxm", "h100-sxm", "h200-sxm", "l40s"]
    # datasheets: H100/H200 900 GB/s NVLink 4, A100 600 GB/s NVLink 3, B200 1.8 TB/s NVLink 5 (both
    # directions together); L40S PCIe Gen4 x16 64 GB/s both ways, no NVLink
    got = {n: (load_node(n).topology, load_node(n).link_gbps()) for n in list_nodes()}
    assert got == {"a100-sxm-80gb": ("nvswitch", 300.0), "b200-sxm": ("nvswitch", 900.0),
                   "h100-sxm": ("nvswitch", 450.0), "h200-sxm": ("nvswitch", 450.0), "l40s": ("pcie", 32.0)}
    assert load_node("h100-sxm").nvlink.nvls and not load_node("a100-sxm-80gb").nvlink.nvls  # type: ignore[union-attr]
    assert all(load_node(n).gpus_per_node == 8 for n in list_nodes())


def test_every_shipped_node_names_a_shipped_gpu_file() -> None:
    # the node file is named after its GPU and names it; b200-sxm's GPU file now ships too
    for name in list_nodes():
        gpu = load_node(name).gpu
        assert gpu == name and gpu in list_hardware(), name
        assert load_hardware(gpu).kind == "gpu"


GOOD = """name: x
gpu: l40s
description: test
sources: [{id: ds, kind: datasheet, citation: c}]
gpus_per_node: 4
topology: pcie
pcie: {source: ds, generation: 4, lanes: 16, GBps_per_direction: 32}
"""


@pytest.mark.parametrize(("old", "new", "message"), [
    ("GBps_per_direction: 32", "GBps_per_direction: 30", "pcie.GBps_per_direction: 30 is not 32"),
    ("source: ds, gen", "source: dx, gen", "pcie.source: 'dx' is not a source id"),
    ("topology: pcie", "topology: nvswitch", "topology: nvswitch needs an nvlink block"),
    ("lanes: 16", "lanes: 16, speed: 3", "pcie.speed: unknown key"),
    ("gpus_per_node: 4", "gpus_per_node: 0", "gpus_per_node"),
    ("gpus_per_node: 4", "gpus_per_node: [4", "invalid YAML"),
])
def test_bad_node_file_is_one_clear_error(old: str, new: str, message: str) -> None:
    assert parse_node(GOOD, "x.yaml").pcie is not None
    with pytest.raises(HardwareFileError, match=r"^x\.yaml: .*" + message.replace("(", r"\(")):
        parse_node(GOOD.replace(old, new), "x.yaml")


def test_nvlink_total_must_be_links_times_per_link() -> None:
    text = (GOOD.replace("topology: pcie", "topology: nvswitch").replace("pcie:", "nvlink:")
            .replace("generation: 4, lanes: 16, GBps_per_direction: 32",
                     "generation: 4, links: 18, GBps_per_link_per_direction: 25, GBps_per_direction: 400, "
                     "nvswitch: true"))
    with pytest.raises(HardwareFileError, match=r"nvlink\.GBps_per_direction: 400 is not links x"):
        parse_node(text, "x.yaml")


def test_unknown_node_names_the_shipped_ones() -> None:
    with pytest.raises(HardwareFileError, match="unknown node 'h300'; shipped: a100-sxm-80gb"):
        load_node("h300")
