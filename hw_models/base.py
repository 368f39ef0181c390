"""What every hardware-file block builds on: the source of a number and the block that cites one.

`Source` says where numbers come from; every block of numbers derives from `Block` (its `source`,
and `key_sources` pointing single keys elsewhere); `_Common` holds what both spec classes share.
schema.py re-exports all of it.
"""

# Names carry their units (size_GB, bandwidth_GBps): mixedCase is the point.
# ruff: noqa: N815

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MATRIX_DTYPES = frozenset({"fp16", "bf16", "fp8", "fp4", "int8", "int4", "tf32"})
DECODER_BITS = frozenset(range(1, 17))
SourceKind = Literal[
    "datasheet", "whitepaper", "paper", "measurement", "calibration", "assumption", "article",
]


class UnsupportedDtypeError(ValueError):
    """A throughput was asked for a dtype the device does not list."""


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where numbers come from: a datasheet, paper, measurement, calibration or an assumption."""

    id: str
    kind: SourceKind
    citation: str
    url: str | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Block:
    """A group of numbers sharing one source (`key_sources` overrides it per key)."""

    source: str
    key_sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Dram(Block):
    type: str
    size_GB: float
    bandwidth_GBps: float
    latency_ns: float
    channels: int  # independent channels (stacks x channels per stack for HBM)
    achievable_bandwidth_fraction: float = field(metadata={"max": 1.0})


def _sources_by_id(sources: tuple[Source, ...]) -> dict[str, Source]:
    return {s.id: s for s in sources}


def _matrix_rate(table: dict[str, float], dtype: str, device: str) -> float:
    if dtype not in table:
        supported = ", ".join(sorted(table))
        raise UnsupportedDtypeError(
            f"{device}: no matrix throughput for dtype {dtype!r}; supported: {supported}"
        )
    return table[dtype]


class _Common:
    """Methods both specs share; they read only the attributes named in HardwareSpec."""

    name: str
    sources: tuple[Source, ...]

    def source_of(self, key: str) -> Source:
        """The Source for a dotted key such as 'dram.bandwidth_GBps' or 'sram.weight_buffer.size_MiB'."""
        node: object = self
        block: Block | None = None
        parts = key.split(".")
        for part in parts[:-1]:
            node = getattr(node, part, None)
            if isinstance(node, Block):
                block = node
        leaf = parts[-1]
        inside = block is not None and id(node) == id(block) and hasattr(block, leaf)
        if block is None or not inside:
            raise KeyError(f"{self.name}: {key!r} is not a key inside a block with a source")
        source_id = block.key_sources.get(leaf, block.source)
        return _sources_by_id(self.sources)[source_id]
