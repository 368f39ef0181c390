"""Training and held-out text for the tiny byte-level model: the Python standard library's sources.

Every Python install has them, so nothing is downloaded. Files are split into train and held-out
sets by a hash of their path relative to the stdlib root (stable across machines and Python
versions), and read in sorted order.
"""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import numpy as np

HELD_OUT_PERCENT = 5
SKIP_PARTS = ("site-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__")


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[Path]:
    root = root or stdlib_root()
    files = [p for p in root.rglob("*.py") if not set(p.relative_to(root).parts) & set(SKIP_PARTS)]
    if not files:
        raise FileNotFoundError(f"no Python sources under {root}: cannot build the tiny-model corpus")
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def is_held_out(rel_path: str) -> bool:
    digest = hashlib.sha256(rel_path.encode()).digest()
    return digest[0] * 100 // 256 < HELD_OUT_PERCENT


def load_corpus(split: str, max_bytes: int, root: Path | None = None) -> np.ndarray:
    """Concatenated UTF-8 bytes (uint8) of the split's files, at most `max_bytes`."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    root = root or stdlib_root()
    chunks, total = [], 0
    for path in stdlib_files(root):
        if is_held_out(path.relative_to(root).as_posix()) != (split == "heldout"):
            continue
        data = path.read_bytes()
        chunks.append(np.frombuffer(data, dtype=np.uint8))
        total += len(data)
        if total >= max_bytes:
            break
    return np.concatenate(chunks)[:max_bytes]
