"""safetensors files, memory-mapped: tensors are read from the page cache when used, never all at once.

The safetensors layout (8-byte little-endian header length, a JSON header of name -> dtype, shape,
data_offsets, then the raw little-endian data) is read here with `np.memmap` (copy-on-write), so an
fp16 tensor costs no process memory until it is touched and a checkpoint is never held twice: the
engine converts (bf16/fp32 -> fp16), fuses or quantizes one tensor at a time. The header is
validated first (offsets inside the file, sizes matching shapes, known dtypes) and every error names
the file and the tensor. Nothing is unpickled.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mpsim.errors import MpsimInputError
from mpsim.traces.atomic import atomic_write

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
MAX_HEADER = 100 * 2**20


@dataclass(frozen=True)
class TensorInfo:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    nbytes: int


def read_header(path: Path) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """A safetensors file's tensors (validated) and its `__metadata__`."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 2 <= n <= min(MAX_HEADER, size - 8):
                raise MpsimInputError(f"{path}: not a safetensors file (header length {n}, file {size} B)")
            raw = json.loads(f.read(n))
    except (OSError, ValueError, struct.error) as exc:
        raise MpsimInputError(f"{path}: not a readable safetensors file ({exc})") from None
    if not isinstance(raw, dict):
        raise MpsimInputError(f"{path}: the safetensors header is not a JSON object")
    meta = raw.pop("__metadata__", None) or {}
    base = 8 + n
    return {name: _info(path, name, entry, base, size) for name, entry in raw.items()}, dict(meta)


def _info(path: Path, name: str, entry: object, base: int, size: int) -> TensorInfo:
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
        raise MpsimInputError(f"{path}: tensor '{name}': unknown or missing dtype in the header ({entry!r})")
    shape, offs = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)
            and isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
        raise MpsimInputError(f"{path}: tensor '{name}': bad shape or data_offsets ({entry!r})")
    dtype = entry["dtype"]
    nbytes = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize
    begin, end = offs
    if end - begin != nbytes or begin < 0 or base + end > size:
        raise MpsimInputError(f"{path}: tensor '{name}': data_offsets {offs} do not hold {dtype} "
                              f"{tuple(shape)} ({nbytes} B) inside the file")
    return TensorInfo(path, dtype, tuple(shape), base + begin, nbytes)


class MappedTensors:
    """The tensors of one or more safetensors files by name, memory-mapped on first use."""

    def __init__(self, files: list[Path]) -> None:
        self.infos: dict[str, TensorInfo] = {}
        self.metadata: dict[str, str] = {}
        for f in files:
            infos, meta = read_header(f)
            for name, info in infos.items():
                if name in self.infos:
                    raise MpsimInputError(f"{f}: tensor '{name}' is also in {self.infos[name].file}")
                self.infos[name] = info
            self.metadata.update(meta)

    @classmethod
    def folder(cls, folder: Path, pattern: str = "*.safetensors") -> MappedTensors:
        files = sorted(folder.glob(pattern))
        if not files:
            raise MpsimInputError(f"{folder}: no {pattern} files (mpsim reads no pickled checkpoints)")
        return cls(files)

    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def raw(self, name: str) -> np.ndarray:
        """The tensor as stored (bf16 as uint16 bits), a copy-on-write view of the mapped file."""
        info = self.infos[name]
        if info.nbytes == 0:
            return np.zeros(info.shape, DTYPES[info.dtype])
        return np.memmap(info.file, dtype=DTYPES[info.dtype], mode="c", offset=info.start, shape=info.shape)

    def float32(self, name: str) -> np.ndarray:
        """A float tensor as fp32 (one copy), e.g. per-weight sensitivities."""
        info = self.infos[name]
        a = self.raw(name)
        if info.dtype == "BF16":
            return check_finite((a.astype(np.uint32) << 16).view(np.float32), info, name)
        if info.dtype not in ("F16", "F32", "F64"):
            raise MpsimInputError(f"{info.file}: tensor '{name}' is {info.dtype}, expected a float tensor")
        return check_finite(a.astype(np.float32), info, name)

    def fp16(self, name: str) -> np.ndarray:
        """A float tensor as fp16: F16 is the mapped view itself; BF16/F32/F64 convert (one copy)."""
        info = self.infos[name]
        a = self.raw(name)
        if info.dtype == "F16":
            return check_finite(a, info, name)
        with np.errstate(over="ignore"):  # past fp16's range: inf, which check_finite names
            if info.dtype == "BF16":
                return check_finite((a.astype(np.uint32) << 16).view(np.float32).astype(np.float16), info,
                                    name)
            if info.dtype in ("F32", "F64"):
                return check_finite(a.astype(np.float16), info, name)
        raise MpsimInputError(f"{info.file}: tensor '{name}' is {info.dtype}, expected a float tensor")


FINITE_CHUNK = 1 << 22  # elements checked at a time (a bounded temporary, not one as large as the tensor)


def check_finite(a: np.ndarray, info: TensorInfo, name: str) -> np.ndarray:
    """`a` itself, or an error naming the tensor and its first NaN or infinite value (a weight past
    fp16's range converts to inf): the engine would otherwise fail deep inside, in a kernel's check."""
    flat = a.reshape(-1)
    for start in range(0, flat.size, FINITE_CHUNK):
        bad = ~np.isfinite(flat[start:start + FINITE_CHUNK])
        if bad.any():
            i = start + int(np.flatnonzero(bad)[0])
            where = tuple(int(x) for x in np.unravel_index(i, a.shape)) if a.ndim else ()
            raise MpsimInputError(f"{info.file}: tensor '{name}': value {flat[i]} at index {list(where)} "
                                  f"(stored {info.dtype}); expected finite weights"
                                  + (" within fp16's range" if np.isinf(flat[i]) else ""))
    return a


def write_safetensors(path: Path, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> Path:
    """Write a standard safetensors file, streaming each array (no second in-memory copy of the data).

    Header: tensors in sorted order, data_offsets relative to the data section, padded with spaces
    to a multiple of 8 bytes (as the safetensors library writes it)."""
    codes = {v: k for k, v in DTYPES.items() if k != "BF16"}
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    names = sorted(tensors)
    for name in names:
        a = tensors[name]
        if a.dtype.newbyteorder("<") not in codes:
            raise ValueError(f"tensor '{name}': dtype {a.dtype} has no safetensors code")
        header[name] = {"dtype": codes[a.dtype.newbyteorder("<")], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name in names:
                a = tensors[name]
                a = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False)
                if a.size:
                    f.write(a.reshape(-1).view(np.uint8).data)

    return atomic_write(path, write)
