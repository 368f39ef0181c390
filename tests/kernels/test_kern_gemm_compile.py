"""The GEMM kernels compile for Hopper (sm_90a) at the configs gemm_config picks, without spills.

Triton's compiler and the ptxas it ships need no GPU, so this runs on the CPU machine: it catches
what the interpreter cannot (unsupported layouts, shared-memory overflow, register spills from the
dequantized tiles). The compile runs in a subprocess, since this test session set TRITON_INTERPRET
(kernels are then interpreted, not compiled). Integer arguments get Triton's divisible-by-16
specialization when their real value allows it, as a real launch would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

import pytest

ARCH = 90
# (w_format, bits, group_size, M, N, K): each GEMV/GEMM kernel, every unpacking branch.
CASES = [
    ("fp16", 16, None, 7, 4096, 4096),
    ("int3-group", 3, 128, 1, 4096, 4096),
    ("int4-group", 4, 4096, 1, 11008, 4096),
    ("int8-group", 8, 128, 16, 4096, 11008),
    ("anyprec", 4, None, 16, 4096, 11008),
    ("anyprec", 2, None, 1, 32000, 4096),
    ("fp16", 16, None, 2048, 4096, 4096),
    ("int3-group", 3, 128, 512, 4096, 4096),
    ("int2-group", 2, 128, 2048, 11008, 4096),
    ("anyprec", 3, None, 2048, 4096, 4096),
]
POINTERS = {"x_ptr": "*fp16", "bias_ptr": "*fp16", "out_ptr": "*fp16", "ws_ptr": "*fp32",
            "cnt_ptr": "*i32", "w_ptr": "*fp16", "qw_ptr": "*i32", "s_ptr": "*fp16",
            "z_ptr": "*fp16", "lut_ptr": "*fp16"}


def test_gpu_configs_compile_for_sm90_without_spills() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(CASES)
    for r in results:
        assert r["error"] is None, r
        assert r["spill_bytes"] == 0 and r["registers"] <= 255, r


def _launch_args(w_format: str, bits: int, group: int | None, m: int, n: int,
                 k: int) -> tuple[Any, dict[str, Any], Any]:
    """(kernel, its arguments as a launch would pass them, config) for one case."""
    from mpsim.kernels import gemm_anyprec, gemm_fp16, gemm_group
    from mpsim.kernels.gemm_common import k_per_split
    from mpsim.kernels.launch_config import gemm_config
    from mpsim.traces.accounting import padded_k

    cfg = gemm_config(m, n, k, w_format, bits, group)
    gemv = cfg.kernel.startswith("gemv")
    kp = padded_k(k, group)
    args: dict[str, Any] = dict(M=m, N=n, K=k, stride_xm=k, stride_om=n, HAS_BIAS=gemv,
                                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k)
    args.update(bias_ptr="ptr" if gemv else None, x_ptr="ptr", out_ptr="ptr")
    if gemv:
        args.update(SPLIT_K=cfg.split_k, ws_ptr="ptr" if cfg.split_k > 1 else None,
                    cnt_ptr="ptr" if cfg.split_k > 1 else None,
                    K_PER_SPLIT=k_per_split(kp if w_format != "fp16" else k, cfg.split_k,
                                            cfg.block_k))
    else:
        args.update(GROUP_M=cfg.group_m)
    if w_format == "fp16":
        args.update(w_ptr="ptr", stride_wn=k)
        module = gemm_fp16
    elif w_format == "anyprec":
        args.update(qw_ptr="ptr", lut_ptr="ptr", KP=kp, stride_qp=n * kp // 32,
                    stride_qn=kp // 32, stride_ln=1 << bits, BITS=bits)
        module = gemm_anyprec
    else:
        assert group is not None
        args.update(qw_ptr="ptr", s_ptr="ptr", z_ptr="ptr", KP=kp, stride_qn=kp * bits // 32,
                    stride_sn=kp // group, BITS=bits, GROUP=group)
        module = gemm_group
    fmt = {"fp16": "fp16", "anyprec": "anyprec"}.get(w_format, "group")
    return getattr(module, f"{'gemv' if gemv else 'gemm'}_{fmt}_kernel"), args, cfg


def _compile_case(case: tuple[Any, ...], ptxas: str) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel, args, cfg = _launch_args(*case)
    signature, constexprs, attrs = {}, {}, {}
    for i, param in enumerate(kernel.params):
        name, value = param.name, args[param.name]
        if name in POINTERS and value is not None:
            signature[name], attrs[(i,)] = POINTERS[name], [["tt.divisibility", 16]]
        elif not param.is_constexpr and value is not None:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name], constexprs[(i,)] = "constexpr", value
    result: dict[str, Any] = {"case": case, "config": cfg.config_dict(), "error": None}
    try:
        compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", ARCH, 32),
                                  options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    except Exception as exc:  # reported, with the case, by the test in the parent process
        result["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
        return result
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(compiled.asm["ptx"])
    out = subprocess.run([ptxas, "-v", f"--gpu-name=sm_{ARCH}a", f.name, "-o", os.devnull],
                         capture_output=True, text=True, check=True).stderr
    os.unlink(f.name)
    result["registers"] = int(re.search(r"Used (\d+) registers", out).group(1))  # type: ignore[union-attr]
    result["spill_bytes"] = int(re.search(r"(\d+) bytes spill stores", out).group(1))  # type: ignore[union-attr]
    result["shared_bytes"] = compiled.metadata.shared
    return result


def main() -> int:
    import triton

    ptxas = triton.knobs.nvidia.ptxas_blackwell.path
    if not ptxas or not os.path.exists(ptxas):
        print("no ptxas bundled with this Triton install; cannot compile for sm_90")
        return 3
    print(json.dumps([_compile_case(case, ptxas) for case in CASES]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
