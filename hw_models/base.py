"""What every hardware-file block builds on: the source of a number and the block that cites one.

`Source` says where numbers come from; every block of numbers derives from `Block` (its `source`,
and `key_sources` pointing single keys elsewhere). schema.py re-exports all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MATRIX_DTYPES = frozenset({"fp16", "bf16", "fp8", "int8", "int4", "tf32"})
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
