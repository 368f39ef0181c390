"""Launch arguments of the fp8 / fp4 kernels for kernels/compile_sm90.py's compile_sm90 (sm_90a on the CPU).

Used by tests/kernels/test_kern_fp8_compile.py (registers, spills, the PTX of the fp8 paths) and by
scripts/sass_mix.py --fp (the SASS instruction mix of their main loops). Pointers are the placeholder
"ptr"; strides are multiples of 16, the divisibility a launch over contiguous tensors infers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpsim.kernels.launch_config import LaunchConfig, cdiv, rowwise_config

FP8_GEMM_TYPES = {"a_ptr": "*u8", "sa_ptr": "*fp32", "w_ptr": "*u8", "sw_ptr": "*fp32",
                  "bias_ptr": "*fp16", "out_ptr": "*fp16", "ws_ptr": "*fp32", "cnt_ptr": "*i32"}


def gemm_fp8_args(m: int, n: int, k: int,
                  per_channel: bool = False) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(gemm_fp8_kernel, its arguments, the GPU config) at one shape."""
    from mpsim.kernels import gemm_fp8

    cfg = gemm_fp8.gemm_fp8_config(m, n, k, on_gpu=True)
    split = cfg.split_k > 1
    bk = cfg.block_k or 1
    args: dict[str, Any] = dict(
        a_ptr="ptr", sa_ptr="ptr", w_ptr="ptr", sw_ptr="ptr", bias_ptr=None, out_ptr="ptr",
        ws_ptr="ptr" if split else None, cnt_ptr="ptr" if split else None, M=m, N=n, K=k,
        K_PER_SPLIT=cdiv(cdiv(k, cfg.split_k), bk) * bk, stride_am=k, stride_wn=k, stride_om=n,
        PER_CHANNEL=per_channel, HAS_BIAS=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k, __types__=FP8_GEMM_TYPES)
    return gemm_fp8.gemm_fp8_kernel, args, cfg


def act_quant_args(m: int, k: int, hw_cvt: bool = True) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(fp8_act_quant_kernel, its arguments, the GPU config) for x (m, k)."""
    from mpsim.kernels import fp8_act_quant

    cfg = rowwise_config("fp8_act_quant_kernel", m, k)
    args: dict[str, Any] = dict(x_ptr="ptr", q_ptr="ptr", s_ptr="ptr", K=k, stride_x=k, stride_q=k,
                                BLOCK=cfg.block_n, HW_CVT=hw_cvt,
                                __types__={"x_ptr": "*fp16", "q_ptr": "*u8", "s_ptr": "*fp32"})
    return fp8_act_quant.fp8_act_quant_kernel, args, cfg


def ptxas_usage(compiled: Any) -> dict[str, int]:
    """Registers per thread and spill-store bytes of a compiled kernel, from `ptxas -v` on its PTX
    for sm_90a (the ptxas Triton bundles)."""
    import os
    import re
    import subprocess
    import tempfile

    import triton

    from mpsim.kernels.compile_sm90 import ARCH

    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(compiled.asm["ptx"])
    try:
        out = subprocess.run([triton.knobs.nvidia.ptxas_blackwell.path, "-v", f"--gpu-name=sm_{ARCH}a",
                              f.name, "-o", os.devnull], capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)
    regs = re.search(r"Used (\d+) registers", out)
    spills = re.search(r"(\d+) bytes spill stores", out)
    if regs is None or spills is None:
        raise ValueError(f"ptxas -v: no register / spill line in its output: {out[-500:]}")
    return {"registers": int(regs.group(1)), "spill_bytes": int(spills.group(1)),
            "shared_bytes": int(compiled.metadata.shared)}


def extra_cases() -> dict[str, Callable[[], tuple[Any, dict[str, Any], LaunchConfig]]]:
    """name -> a no-argument builder of (kernel, arguments, config), for the fp4 and fp8-KV kernels."""
    return {}
