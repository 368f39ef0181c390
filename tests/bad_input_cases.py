"""Shared helpers of the bad-input tests: run a command in-process, expect one clear error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mpsim.cli import main

TINY_CONFIG = Path(__file__).resolve().parents[1] / "mpsim" / "data" / "tiny" / "config.json"
HW_FILE = Path(__file__).resolve().parents[1] / "hw_models" / "h200-sxm.yaml"
BINARY = b"\x89PNG\r\n\x1a\n" + bytes(range(255, -1, -1)) * 8  # a PNG header: not UTF-8 at byte 0
GENERIC_HEADER = "op,m,n,k,w_format,w_bits,group_size,measured_us,protocol\n"


def clear_error(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """`mpsim ARGV` exits 2 with one `mpsim: error:` line that holds every needle, no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("mpsim: error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def tiny_config(folder: Path, **changes: object) -> Path:
    """The shipped tiny model's config.json with `changes` (None: the key set to null)."""
    cfg = json.loads(TINY_CONFIG.read_text())
    cfg.update(changes)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def write(path: Path, text: str | bytes) -> str:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def hw_yaml(path: Path, old: str, new: str) -> str:
    text = HW_FILE.read_text()
    assert old in text
    return write(path, text.replace(old, new, 1))


def no_env_limits() -> None:
    """The stated limits at their defaults (a developer's own MPSIM_MAX_* would change them)."""
    for key in list(os.environ):
        if key.startswith("MPSIM_MAX_"):
            del os.environ[key]
