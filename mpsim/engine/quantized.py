"""Quantized checkpoints: `mpsim quantize` writes one, every engine command loads it directly.

A quantized folder is self-contained: the source's config.json and tokenizer files, and
- `model.quantized.safetensors`: fp16 embeddings, norms, lm_head and biases; per decoder-block linear
  either the group format (`.qweight` int32, `.scales` / `.zeros` fp16) or ONE any-precision parent
  (`.planes` int32 (P, N, Kp/32), `.lut{b}` fp16 (N, 2^b) for b = seed..P), as docs/formats.md pins
  them (reference/group_quant.py, reference/anyprec.py);
- `quantization.json`: the header: format and version, the weight format (family, bits, group size or
  parent and seed widths), how the any-precision clustering weighted the values (`sensitivity`),
  the source folder (the fp16 baseline of `quality`/`evaluate`) and every tensor's dtype and shape.
Loading memory-maps the tensors (mpsim.engine.mapped) and checks them against the header first:
a tensor missing, extra, or of another dtype or shape is an error naming it. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsim.engine.mapped import MappedTensors
from mpsim.errors import MpsimInputError
from mpsim.policy import Policy, parse_policy

# Version 2: group codes packed for pair extraction (docs/formats.md); version 1 packed them LSB
# first, and its folders are rejected (their codes would read as other codes).
FORMAT, VERSION = "mpsim-quantized", 2
HEADER, TENSORS = "quantization.json", "model.quantized.safetensors"


@dataclass(frozen=True)
class QuantInfo:
    """A quantized folder's header, validated."""

    folder: Path
    policy: str             # the spelling it was quantized for; the engine commands' default
    family: str             # "uniform" | "anyprec"
    bits: int               # group bits, or the any-precision parent width
    seed_bits: int | None   # any-precision only
    group_size: int | None  # uniform only (0 = whole row)
    sensitivity: dict[str, Any] | None
    source: str | None
    tensors: dict[str, dict[str, Any]]

    def widths(self) -> range:
        return range(self.seed_bits or self.bits, self.bits + 1)

    def describe(self) -> str:
        if self.family == "anyprec":
            return f"an any-precision {self.bits}-bit parent (readable at {self.seed_bits}..{self.bits} bits)"
        return f"{self.bits}-bit group weights (group {self.group_size or 'whole row'})"

    def check_policy(self, policy: Policy) -> None:
        """Reading `policy` from this folder must not ask for weights it does not store."""
        where = self.folder / HEADER
        if policy.family == "fp16":
            raise MpsimInputError(f"{where}: the folder stores {self.describe()}, not fp16 weights; policy "
                                  f"{policy.spelling!r} needs the original checkpoint ({self.source})")
        if self.family == "anyprec":
            want = {policy.prefill_bits, *(b for _, b in policy.decode_schedule)}
            if policy.family != "anyprec" or not want <= set(self.widths()):
                raise MpsimInputError(f"{where}: policy {policy.spelling!r} reads {sorted(want)}-bit "
                                      f"{policy.family} weights; the folder stores {self.describe()}")
            return
        same = (policy.family == "uniform" and policy.prefill_bits == self.bits
                and _group(policy) == self.group_size)
        if not same:
            raise MpsimInputError(f"{where}: policy {policy.spelling!r} does not match the folder's "
                                  f"{self.describe()}; quantize the original checkpoint for it")


def _group(policy: Policy) -> int:
    return 0 if policy.group_size == 0 else int(policy.group_size or 128)


def is_quantized(folder: str | Path) -> bool:
    return (Path(folder) / HEADER).exists()


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def read_header(folder: str | Path) -> QuantInfo:
    folder = Path(folder)
    path = folder / HEADER
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MpsimInputError(f"{path}: cannot read the quantization header ({exc})") from None
    if isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("version") == 1:
        raise MpsimInputError(f"{path}: written with format {FORMAT!r} version 1, whose group codes are "
                              f"packed LSB first; version {VERSION} packs them for pair extraction "
                              "(docs/formats.md): quantize the original checkpoint again")
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        got = (raw.get("format"), raw.get("version")) if isinstance(raw, dict) else raw
        raise MpsimInputError(f"{path}: expected format {FORMAT!r} version {VERSION}, got {got!r}")
    w = raw.get("weights")
    if not isinstance(w, dict) or w.get("family") not in ("uniform", "anyprec") or not isinstance(
            w.get("bits"), int) or not isinstance(raw.get("tensors"), dict):
        raise MpsimInputError(f"{path}: 'weights' must give family (uniform|anyprec) and bits, and "
                              "'tensors' every tensor's dtype and shape")
    try:
        parse_policy(str(raw.get("policy")))
    except ValueError as exc:
        raise MpsimInputError(f"{path}: 'policy': {exc}") from None
    return QuantInfo(folder, str(raw["policy"]), w["family"], w["bits"], w.get("seed_bits"),
                     w.get("group_size"), raw.get("sensitivity"), raw.get("source"), raw["tensors"])


def open_tensors(info: QuantInfo) -> MappedTensors:
    """The folder's tensors, memory-mapped, after checking them against the header one by one."""
    path = info.folder / TENSORS
    if not path.exists():
        raise MpsimInputError(f"{path}: missing (the header {info.folder / HEADER} describes it)")
    mapped = MappedTensors([path])
    for name, want in info.tensors.items():
        got = mapped.infos.get(name)
        if got is None:
            raise MpsimInputError(f"{path}: tensor '{name}' is in the header but not in the file")
        if [got.dtype, list(got.shape)] != [want.get("dtype"), want.get("shape")]:
            raise MpsimInputError(f"{path}: tensor '{name}' is {got.dtype} {list(got.shape)}; the header "
                                  f"says {want.get('dtype')} {want.get('shape')}")
    extra = sorted(set(mapped.infos) - set(info.tensors))
    if extra:
        raise MpsimInputError(f"{path}: tensor '{extra[0]}' is not in the header {info.folder / HEADER}")
    return mapped


def header_dict(policy: Policy, tensors: dict[str, Any], weights: dict[str, Any],
                sensitivity: dict[str, Any] | None, source: Path | None,
                spec: dict[str, Any]) -> dict[str, Any]:
    dtypes = {"float16": "F16", "int32": "I32", "float32": "F32", "uint8": "U8"}
    return {
        "format": FORMAT, "version": VERSION, "policy": policy.spelling, "weights": weights,
        "sensitivity": sensitivity, "source": None if source is None else str(source.resolve()),
        "model": spec, "file": TENSORS,
        "tensors": {k: {"dtype": dtypes[str(v.dtype)], "shape": list(v.shape)} for k, v in tensors.items()},
    }


Progress = Callable[[int], None]
