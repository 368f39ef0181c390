"""The fp8 / fp4 kernels compile for Hopper (sm_90a) and Blackwell (sm_100a, the bundled ptxas takes it)
at their GPU configs (tuned for Hopper), without spills, and lower to the instructions they are meant
to: fp8 wgmma (e4m3 x e4m3 -> f32) on sm_90a and tcgen05.mma kind::f8f6f4 on sm_100a for the W8A8
GEMMs at one row and at 2048, and the hardware's saturating conversion `cvt.rn.satfinite.e4m3x2.f32`
for the activation quantizer's HW_CVT path (what reference/fp8.py's saturate=True implements; the
interpreter cannot run it). Compiled in a subprocess without TRITON_INTERPRET (this session
interprets kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest


def _cases() -> list[tuple[str, Any]]:
    from mpsim.kernels import compile_fp

    out: list[tuple[str, Any]] = []
    for m in (1, 2048):
        out.append((f"gemm_fp8 m={m}", compile_fp.gemm_fp8_args(m, 4096, 4096, per_channel=m == 1)))
    out.append(("act_quant", compile_fp.act_quant_args(16, 4096)))
    for m in (1, 2048):
        out.append((f"gemm_fp8b m={m}", compile_fp.gemm_fp8b_args(m, 4096, 4096)))
    out += [(name, fn()) for name, fn in compile_fp.extra_cases().items()]
    return out


def main() -> int:
    import triton

    from mpsim.kernels.compile_fp import ptxas_usage
    from mpsim.kernels.compile_sm90 import compile_sm90

    if not triton.knobs.nvidia.ptxas_blackwell.path:
        print("no ptxas bundled with this Triton install")
        return 3
    results = []
    for arch in (90, 100):
        for name, (kernel, args, cfg) in _cases():
            compiled = compile_sm90(kernel, args, cfg, arch)
            ptx = compiled.asm["ptx"]
            fp8_mma = ("f32.e4m3.e4m3" in ptx and "wgmma.mma_async" in ptx) if arch == 90 else \
                "tcgen05.mma.cta_group::1.kind::f8f6f4" in ptx
            results.append(dict(name=f"{name} sm_{arch}", **ptxas_usage(compiled, arch), fp8_mma=fp8_mma,
                                satfinite="cvt.rn.satfinite.e4m3x2.f32" in ptx))
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    import sass_mix  # scripts/sass_mix.py --fp's counting of one case

    mix = sass_mix.count_case(("fp", "gemm_fp8 m=1", "sm_90a"))
    results.append(dict(name="sass gemm_fp8 m=1", spill_bytes=0, registers=0, **mix))
    print(json.dumps(results))
    return 0


def test_fp_kernels_compile_for_sm90_without_spills() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["name"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
    for r in results.values():
        assert r["spill_bytes"] == 0 and r["registers"] <= 255, r
    for arch in (90, 100):
        for name in ("gemm_fp8 m=1", "gemm_fp8 m=2048", "gemm_fp8b m=1", "gemm_fp8b m=2048"):
            assert results[f"{name} sm_{arch}"]["fp8_mma"], (name, arch)
        assert results[f"act_quant sm_{arch}"]["satfinite"]
    mix = results["sass gemm_fp8 m=1"]  # the fp8 dot's QGMMA counted on the tensor pipe
    assert mix["kernel"] == "gemm_fp8_kernel" and mix["tensor"] > 0 and mix["issue"] > 0
    # the committed row the GPU model reads (mpsim/sim/gpu/sass_table_fp.py) is this count
    from mpsim.sim.gpu import sass_table_fp
    cols = sass_table_fp.COLUMNS
    committed = [dict(zip(cols, r, strict=True)) for r in sass_table_fp.ROWS
                 if r[0] == "gemm_fp8_kernel" and r[cols.index("arch")] == "sm_90a" and r[3] == 16]
    assert len(committed) == 1 and {k: mix[k] for k in cols} == committed[0]


if __name__ == "__main__":
    sys.exit(main())
