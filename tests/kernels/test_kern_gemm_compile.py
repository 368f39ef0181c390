"""The GEMM kernels compile for Hopper (sm_90a) and Ampere (sm_80) at the configs gemm_config picks,
without spills; so does the inline-asm one-row group GEMV (kernels/gemv_group_asm.py) at 4, 3, 2 bits.
ptxas leaves their wgmmas unserialized (no C7515 note: kernels/compile_sm90.py serialized_wgmma).

Triton's compiler and the ptxas it ships need no GPU, so this runs on the CPU machine: it catches
what the interpreter cannot (unsupported layouts, shared-memory overflow, register spills from the
dequantized tiles). The compile runs in a subprocess, since this test session set TRITON_INTERPRET
(kernels are then interpreted, not compiled). Integer arguments get Triton's divisible-by-16
specialization when their real value allows it, as a real launch would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

# (w_format, bits, group_size, M, N, K): each GEMV/GEMM kernel, every unpacking branch.
CASES = [
    ("fp16", 16, None, 7, 4096, 4096),
    ("int3-group", 3, 128, 1, 4096, 4096),
    ("int4-group", 4, 4096, 1, 11008, 4096),
    ("int8-group", 8, 128, 16, 4096, 11008),
    ("int4-group", 4, 128, 16, 11008, 4096),  # the dot-operand tile (ptxas serialized its wgmmas)
    ("int3-group", 3, 128, 16, 4096, 11008),  # unit 3 gathered high on sm_90a, low on sm_80
    ("anyprec", 4, None, 16, 4096, 11008),
    ("anyprec", 2, None, 1, 32000, 4096),
    ("anyprec", 3, None, 1, 4096, 11008),  # the one-row pair-table path
    ("fp16", 16, None, 2048, 4096, 4096),
    ("int3-group", 3, 128, 512, 4096, 4096),
    ("int2-group", 2, 128, 2048, 11008, 4096),
    ("anyprec", 3, None, 2048, 4096, 4096),
    ("anyprec", 4, None, 2048, 4096, 4096),  # the LUT tile (ptxas serialized its wgmmas)
]
# the inline-asm one-row group GEMV at the launcher's tile (256 x 32: the fp16 partial sums)
# (K = 4000 pads to KP = 4096: the masked activation load, EVEN_K False)
ASM_CASES = [("int4-group", 4, 128, 1, 4096, 4096), ("int3-group", 3, 128, 1, 11008, 4096),
             ("int2-group", 2, 128, 1, 4096, 11008), ("int4-group", 4, 128, 1, 4096, 4000)]
ARCHES = (90, 80)


def test_gpu_configs_compile_for_sm90_and_sm80_without_spills() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == (len(CASES) + len(ASM_CASES)) * len(ARCHES)
    assert sum(r["kernel"] == "gemv_group_asm_kernel" for r in results) == 2 * len(ASM_CASES)
    for r in results:
        assert r["error"] is None, r
        assert r["spill_bytes"] == 0 and r["registers"] <= 255, r
        # ptxas serialized the loop's wgmmas (each waited for): the K loop's zero-trip path was
        # back (kernels/gemm_common.py gemv_program), which the simulator's overlap does not price
        assert r["serialized"] is None, r


def test_the_serialization_note_is_read_from_ptxas_report() -> None:
    """serialized_wgmma finds ptxas's C7515 note (as ptxas 13.4 printed it for the 16-row int4 GEMV
    before the loops' tl.assume) and nothing in a report without it."""
    from mpsim.kernels.compile_sm90 import serialized_wgmma

    note = ("(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
            "non wgmma instructions defining accumulator registers of a wgmma between start and end "
            "of the pipeline stage in the function 'gemv_group_kernel' in line 1140")
    used = "ptxas-blackwell info    : Used 82 registers, used 1 barriers"
    assert serialized_wgmma(f"ptxas-blackwell info    : {note}\n{used}") == note
    assert serialized_wgmma(used) is None


def _compile_case(case: tuple[Any, ...], arch: int, asm: bool) -> dict[str, Any]:
    from mpsim.kernels.compile_sm90 import (
        compile_sm90,
        launch_args,
        ptxas_report,
        ptxas_usage,
        serialized_wgmma,
    )

    kernel, args, cfg = launch_args(*case, gemv_bias=True, asm=asm)
    result: dict[str, Any] = {"case": case, "arch": arch, "kernel": cfg.kernel,
                              "config": cfg.config_dict(), "error": None}
    try:
        compiled = compile_sm90(kernel, args, cfg, arch)
    except Exception as exc:  # reported, with the case, by the test in the parent process
        result["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
        return result
    out = ptxas_report(compiled, arch)
    result["serialized"] = serialized_wgmma(out)
    result.update(ptxas_usage(out))
    result["shared_bytes"] = compiled.metadata.shared
    return result


def main() -> int:
    import triton

    ptxas = triton.knobs.nvidia.ptxas_blackwell.path
    if not ptxas or not os.path.exists(ptxas):
        print("no ptxas bundled with this Triton install; cannot compile for sm_90")
        return 3
    print(json.dumps([_compile_case(case, arch, asm) for arch in ARCHES
                      for cases, asm in ((CASES, False), (ASM_CASES, True)) for case in cases]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
