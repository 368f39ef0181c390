"""scripts/sass_opcodes.py lists one kernel's K-loop opcodes by pipe; its per-pipe totals are the
committed table's row for the case (the same compile and count as scripts/sass_mix.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.sim.gpu.sass_table import COLUMNS, ROWS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sass_opcodes.py"


def test_the_pipe_totals_are_the_tables_row() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    proc = subprocess.run([sys.executable, str(SCRIPT), "fp16", "16", "none", "1", "64", "64", "0"],
                          env=env, capture_output=True, text=True, timeout=600)
    if "no ptxas" in proc.stdout + proc.stderr:
        pytest.skip("no ptxas on this machine")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    total = int(lines[0].split(":")[1].split()[0])
    opcodes = {line.split()[0]: int(line.split()[1]) for line in lines[1:-1]}
    assert sum(opcodes.values()) == total and opcodes["FFMA"] > 0
    parts = lines[-1].removeprefix("by pipe: ").split(", ")
    by_pipe = {p: int(n) for p, n in (part.split() for part in parts)}
    row = next(dict(zip(COLUMNS, r, strict=True)) for r in ROWS
               if r[:9] == ("sm_90a", "gemv_fp16_kernel", "fp16", 16, 1, 64, 64, 4, 0))
    assert row["loop_instructions"] == total
    lanes_per_count = 4 * 32 / (64 * 64)  # 4 warps of 32 threads over a 64 x 64 tile
    for pipe in ("fp32", "alu", "cvt", "sfu", "lsu", "tensor", "other"):
        assert round(by_pipe.get(pipe, 0) * lanes_per_count, 4) == row[pipe], pipe
