"""Node files: how the GPUs of one server talk to each other (hw_models/nodes/<gpu>.yaml).

A node file names its GPU (a hardware file's stem), how many GPUs a node holds, the topology
(`nvswitch`: every GPU reaches every other through NVSwitch at its full NVLink bandwidth; `pcie`: the
GPUs share the host's PCIe tree, whose switches and sockets no datasheet gives), the NVLink of an
SXM board (generation, links, GB/s per link and per direction, NVSwitch, NVLink SHARP) and the PCIe
link of the board (generation, lanes, GB/s per direction). Every block cites a source by id.
`load_node(name_or_path)` reads one; `list_nodes()` names the shipped ones. docs/hardware.md#nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from mpsim.hw_models.base import Source
from mpsim.hw_models.errors import HardwareFileError
from mpsim.hw_models.validate import build
from mpsim.hw_models.yaml_load import YAMLError, safe_yaml, yaml_problem

_PACKAGE = "mpsim.hw_models"
_FOLDER = "nodes"
# Per-direction bandwidth of one x16 link by PCIe generation (GB/s, after 128b/130b encoding, rounded
# as the PCI-SIG and NVIDIA datasheets round: Gen4 64 GB/s both ways, Gen5 128 GB/s).
PCIE_X16_GBPS = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}


@dataclass(frozen=True)
class NvLink:
    source: str
    generation: int
    links: int
    GBps_per_link_per_direction: float
    GBps_per_direction: float
    nvswitch: bool
    nvls: bool = False  # NVLink SHARP (in-switch reduction, NVSwitch gen 3+): NCCL's NVLS algorithm


@dataclass(frozen=True)
class Pcie:
    source: str
    generation: int = field(metadata={"min": 3, "max": 6})
    lanes: int
    GBps_per_direction: float


@dataclass(frozen=True)
class CollectiveFit:
    """What the node's collectives reach, fitted on measured collectives (docs/collectives.md
    #fitted-constants; mpsim/sim/collectives.py NodeFit has each constant's meaning). `fitted_on`
    names the rows. A node without this block prices NCCL with NCCL's own tuning model (every
    scale 1, bus efficiency 1 of the datasheet link: an assumption) and has no custom all-reduce."""

    fitted_on: str
    nccl_efficiency: float
    nccl_allreduce_efficiency: float
    nccl_latency_scale: float
    nccl_hop_scale: float
    custom_latency_us: float = field(default=0.0, metadata={"min": 0})
    custom_efficiency: float = 1.0
    vllm_extra_us: float = field(default=0.0, metadata={"min": 0})
    trtllm_twoshot_efficiency: float = field(default=0.0, metadata={"min": 0})
    trtllm_twoshot_us: float = field(default=0.0, metadata={"min": 0})
    vllm_twoshot_us: float = field(default=0.0, metadata={"min": 0})
    eager_floor_us: float = field(default=0.0, metadata={"min": 0})
    eager_other_floor_us: float = field(default=0.0, metadata={"min": 0})
    pcie_exponent: float = field(default=0.0, metadata={"min": 0})
    group_penalty: float = field(default=0.0, metadata={"min": 0, "max": 1.9})
    nvls_fraction: float = field(default=0.0, metadata={"min": 0})


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpu: str  # the hardware file's stem
    description: str
    sources: tuple[Source, ...]
    gpus_per_node: int = field(metadata={"max": 72})
    topology: Literal["nvswitch", "pcie"]
    nvlink: NvLink | None = None
    pcie: Pcie | None = None
    collectives: CollectiveFit | None = None

    def link_gbps(self) -> float:
        """Per-direction bandwidth of one GPU's link to its peers: NVLink when the node has it."""
        if self.nvlink is not None:
            return self.nvlink.GBps_per_direction
        assert self.pcie is not None  # _check_relations: a pcie node has its pcie block
        return self.pcie.GBps_per_direction


def list_nodes() -> list[str]:
    root = resources.files(_PACKAGE).joinpath(_FOLDER)
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_node(name_or_path: str) -> NodeSpec:
    """A shipped node by its GPU's name ("h100-sxm") or a user's node file by path."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path)
        try:
            return parse_node(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise HardwareFileError(f"{path}: cannot read node file: {exc}") from exc
    names = list_nodes()
    if name_or_path not in names:
        raise HardwareFileError(f"unknown node {name_or_path!r}; shipped: {', '.join(names)} "
                                "(or give a path to a .yaml file)")
    text = resources.files(_PACKAGE).joinpath(_FOLDER, f"{name_or_path}.yaml").read_text(encoding="utf-8")
    return parse_node(text, f"nodes/{name_or_path}.yaml")


def read_yaml(text: str, file: str) -> Any:
    """The one place node files are parsed: mpsim's YAML loader (safe, no duplicate keys)."""
    try:
        return safe_yaml(text)
    except YAMLError as exc:
        raise HardwareFileError(f"{file}: {yaml_problem(exc)}") from exc


def parse_node(text: str, file: str) -> NodeSpec:
    spec = build(NodeSpec, read_yaml(text, file), file)
    _check_relations(spec, file)
    return spec


def _check_relations(spec: NodeSpec, file: str) -> None:
    ids = {s.id for s in spec.sources}
    for block, key in ((spec.nvlink, "nvlink"), (spec.pcie, "pcie")):
        if block is not None and block.source not in ids:
            raise HardwareFileError(f"{file}: {key}.source: {block.source!r} is not a source id "
                                    f"(have: {', '.join(sorted(ids))})")
    if spec.topology == "nvswitch" and (spec.nvlink is None or not spec.nvlink.nvswitch):
        raise HardwareFileError(f"{file}: topology: nvswitch needs an nvlink block with nvswitch: true")
    if spec.topology == "pcie" and (spec.pcie is None or spec.nvlink is not None):
        raise HardwareFileError(f"{file}: topology: pcie needs a pcie block and no nvlink block")
    if spec.nvlink is not None:
        nv = spec.nvlink
        if abs(nv.links * nv.GBps_per_link_per_direction - nv.GBps_per_direction) > 1e-6:
            raise HardwareFileError(
                f"{file}: nvlink.GBps_per_direction: {nv.GBps_per_direction:g} is not links x "
                f"GBps_per_link_per_direction = {nv.links} x {nv.GBps_per_link_per_direction:g}")
    if spec.pcie is not None:
        pc = spec.pcie
        expected = PCIE_X16_GBPS[pc.generation] * pc.lanes / 16
        if abs(pc.GBps_per_direction - expected) > 1e-6:
            raise HardwareFileError(f"{file}: pcie.GBps_per_direction: {pc.GBps_per_direction:g} is not "
                                    f"{expected:g} (Gen{pc.generation} x{pc.lanes})")
