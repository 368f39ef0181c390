"""The committed per-weight instruction table (mpsim/sim/gpu/sass_table.py) is what the shipped
kernels compile to: one case per architecture recompiled (sm_90a, sm_80) on the CPU must match its
row exactly, and the table covers every kernel, format and candidate tile the GPU model prices on
each architecture."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsim.kernels.launch_config import GEMV_ROW_TILES, GEMV_TILES
from mpsim.sim.gpu.sass_table import COLUMNS, ROWS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sass_mix.py"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_table_covers_every_kernel_and_width(arch: str) -> None:
    rows = [r for r in (dict(zip(COLUMNS, r, strict=True)) for r in ROWS) if r["arch"] == arch]
    kinds = {(r["kernel"], r["bits"]) for r in rows}
    # the inline-asm one-row group GEMV at the launcher's tile (kernels/gemv_group_asm.py)
    assert {("gemv_group_asm_kernel", b) for b in (4, 3, 2)} <= kinds
    for path in ("gemv", "gemm"):
        assert (f"{path}_fp16_kernel", 16) in kinds
        assert all((f"{path}_group_kernel", b) in kinds for b in (8, 4, 3, 2))
        assert all((f"{path}_anyprec_kernel", b) in kinds for b in range(2, 9))
    for m, tiles in ((1, GEMV_TILES), (16, GEMV_ROW_TILES)):
        for kernel in ("gemv_fp16_kernel", "gemv_group_kernel", "gemv_anyprec_kernel"):
            have = {(r["block_n"], r["block_k"]) for r in rows
                    if r["kernel"] == kernel and r["block_m"] == m}
            assert set(tiles) <= have, (kernel, m)
    assert all(r["issue"] > 0 for r in rows)
    # decode attention over fp16/int8/int4 KV, one query head and a GQA group of 16 rows
    kv = {(r["bits"], r["block_m"], r["block_k"]) for r in rows
          if r["kernel"] == "attention_decode_kernel"}
    assert {(b, bg, d) for b in (16, 8, 4) for bg in (1, 16) for d in (64, 128)} <= kv


def test_decode_attention_trips_are_priced_from_the_table() -> None:
    from mpsim.sim.gpu.library.mpsim_attention import decode_trip_pipes
    from mpsim.sim.gpu.sass import per_weight_mix

    cfg = {"block_m": 1, "block_n": 64, "block_k": 128, "num_warps": 4}
    mix4, mix8 = (per_weight_mix("attention_decode_kernel", b, 1, 64, 128, 4) for b in (4, 8))
    assert decode_trip_pipes(4, 4, cfg) == {k: 2 * 64 * 128 * v for k, v in mix4.items()}
    mixed = decode_trip_pipes(8, 4, cfg)
    assert mixed["issue"] == 64 * 128 * (mix4["issue"] + mix8["issue"])
    # the folded int4 loop issues fewer slots per element than the fp16 one (sm_90a)
    assert mix4["issue"] < per_weight_mix("attention_decode_kernel", 16, 1, 64, 128, 4)["issue"]


def test_a_recompiled_kernel_matches_its_committed_row() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], env=env, capture_output=True,
                          text=True, timeout=900)
    if "no ptxas" in proc.stdout:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "matches the table" in proc.stdout
