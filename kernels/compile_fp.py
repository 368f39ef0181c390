"""Launch arguments of the fp8 / fp4 kernels for kernels/compile_sm90.py's compile_sm90 (sm_90a on the CPU).

Used by tests/kernels/test_kern_fp8_compile.py (registers, spills, the PTX of the fp8 paths) and by
scripts/sass_mix.py --fp (the SASS instruction mix of their main loops). Pointers are the placeholder
"ptr"; strides are multiples of 16, the divisibility a launch over contiguous tensors infers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from mpsim.kernels.launch_config import LaunchConfig, cdiv, loop_stages_of, rowwise_config

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


def gemm_fp8b_args(m: int, n: int, k: int) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(gemm_fp8b_kernel, its arguments, the GPU config) at one shape (128x128 weight blocks)."""
    from mpsim.kernels import gemm_fp8b

    cfg = gemm_fp8b.gemm_fp8b_config(m, n, k, on_gpu=True)
    split = cfg.split_k > 1
    bk = cfg.block_k or 1
    args: dict[str, Any] = dict(
        a_ptr="ptr", sa_ptr="ptr", w_ptr="ptr", sw_ptr="ptr", bias_ptr=None, out_ptr="ptr",
        ws_ptr="ptr" if split else None, cnt_ptr="ptr" if split else None, M=m, N=n, K=k,
        K_PER_SPLIT=cdiv(cdiv(k, cfg.split_k), bk) * bk, stride_am=k, stride_sam=cdiv(k, 128),
        stride_wn=k, stride_swn=cdiv(k, 128), stride_om=n, HAS_BIAS=False, BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n, BLOCK_K=bk, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k, SCALE_BLOCK=128,
        __types__=FP8_GEMM_TYPES)
    return gemm_fp8b.gemm_fp8b_kernel, args, cfg


def act_quant_args(m: int, k: int, hw_cvt: bool = True) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(fp8_act_quant_kernel, its arguments, the GPU config) for x (m, k)."""
    from mpsim.kernels import fp8_act_quant

    cfg = rowwise_config("fp8_act_quant_kernel", m, k)
    args: dict[str, Any] = dict(x_ptr="ptr", q_ptr="ptr", s_ptr="ptr", K=k, stride_x=k, stride_q=k,
                                BLOCK=cfg.block_n, HW_CVT=hw_cvt,
                                __types__={"x_ptr": "*fp16", "q_ptr": "*u8", "s_ptr": "*fp32"})
    return fp8_act_quant.fp8_act_quant_kernel, args, cfg


def ptxas_usage(compiled: Any, arch: int = 90) -> dict[str, int]:
    """Registers per thread, spill-store bytes and shared memory of a compiled kernel, from `ptxas
    -v` on its PTX for sm_{arch}a (compile_sm90.ptxas_report / ptxas_usage)."""
    from mpsim.kernels import compile_sm90

    usage = compile_sm90.ptxas_usage(compile_sm90.ptxas_report(compiled, arch))
    return {**usage, "shared_bytes": int(compiled.metadata.shared)}


def gemv_fp4_args(m: int, n: int, k: int, kind: str,
                  plain_loop: bool = False) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(gemv_fp4_kernel, its arguments, the GPU config) at one shape (K a multiple of the block);
    `plain_loop`: without the config's loop_stages (the K loop as Triton leaves it)."""
    from mpsim.kernels import gemv_fp4
    from mpsim.reference.fp4_quant import FP4_BLOCK

    b = FP4_BLOCK[kind]
    cfg = gemv_fp4.gemv_fp4_config(m, n, k, kind, on_gpu=True)
    if plain_loop:
        cfg = dataclasses.replace(cfg, extra=())
    split = cfg.split_k > 1
    bk = cfg.block_k or 1
    args: dict[str, Any] = dict(
        x_ptr="ptr", qw_ptr="ptr", s_ptr="ptr", bias_ptr=None, out_ptr="ptr",
        ws_ptr="ptr" if split else None, cnt_ptr="ptr" if split else None, M=m, N=n, K=k, KP=k,
        K_PER_SPLIT=cdiv(cdiv(k, cfg.split_k), bk) * bk, g_scale=1.0, stride_xm=k, stride_qn=k // 8,
        stride_sn=k // b, stride_om=n, HAS_BIAS=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=bk, B=b, MX=kind == "mxfp4", GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k,
        LOOP_STAGES=loop_stages_of(cfg.extra),
        __types__={"x_ptr": "*fp16", "qw_ptr": "*i32", "s_ptr": "*u8", "bias_ptr": "*fp16",
                   "out_ptr": "*fp16", "ws_ptr": "*fp32", "cnt_ptr": "*i32", "g_scale": "fp32"})
    return gemv_fp4.gemv_fp4_kernel, args, cfg


def attention_decode_fp8_args(block_g: int, head_dim: int,
                               paged: bool = False) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(attention_decode_fp8_kernel, arguments, config) on a GPU: one query head (block_g 1) or a GQA
    group of 16 rows, KV 8192 tokens split as attention_decode_config does, 32 KV heads."""
    from mpsim.kernels import attention_decode_fp8
    from mpsim.kernels.launch_config import attention_decode_config

    base = attention_decode_config(1, 32 * block_g, 32, head_dim, 8192, 8, 64 if paged else None)
    cfg = LaunchConfig("attention_decode_fp8_kernel", base.grid, base.block_m, base.block_n, base.block_k,
                       base.num_warps, base.num_stages, base.split_k)
    kernel = attention_decode_fp8.attention_decode_fp8_kernel
    args: dict[str, Any] = {name: 16 * 1024 for name in kernel.arg_names if name.startswith("stride")}
    types = {"q_ptr": "*fp16", "o_ptr": "*fp16", "kc_ptr": "*i32", "vc_ptr": "*i32", "ks_ptr": "*fp32",
             "vs_ptr": "*fp32", "lens_ptr": "*i32", "table_ptr": "*i32", "ws_acc": "*fp32",
             "ws_ml": "*fp32", "counters": "*i32", "qk_scale": "fp32"}
    args.update({name: "ptr" for name in types if types[name].startswith("*")})
    args.update(qk_scale=0.5, split_len=512, num_splits=16, ws_splits=16, GROUP=block_g, D=head_dim,
                PAGED=paged, KV_BLOCK=64, BLOCK_G=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_D=cfg.block_k,
                ONE_SPLIT=False, __types__=types)
    return kernel, args, cfg


def extra_cases() -> dict[str, Callable[[], tuple[Any, dict[str, Any], LaunchConfig]]]:
    """name -> a no-argument builder of (kernel, arguments, config), for the fp4 and fp8-KV kernels."""
    out: dict[str, Callable[[], tuple[Any, dict[str, Any], LaunchConfig]]] = {}
    for kind in ("nvfp4", "mxfp4"):
        for m in (1, 16, 2048):
            out[f"gemv_{kind} m={m}"] = functools.partial(gemv_fp4_args, m, 4096, 4096, kind)
        # one row with the loop unpipelined too (traces without loop_stages price from it)
        out[f"gemv_{kind} m=1 plain"] = functools.partial(gemv_fp4_args, 1, 4096, 4096, kind, True)
    for bg in (1, 16):
        out[f"attention_decode_fp8 g={bg}"] = functools.partial(attention_decode_fp8_args, bg, 128, True)
    return out


def all_cases() -> dict[str, Callable[[], tuple[Any, dict[str, Any], LaunchConfig]]]:
    """Every fp8 / fp4 kernel at its GPU config (scripts/sass_mix.py --fp counts these)."""
    out: dict[str, Callable[[], tuple[Any, dict[str, Any], LaunchConfig]]] = {
        f"gemm_fp8 m={m}": functools.partial(gemm_fp8_args, m, 4096, 4096) for m in (1, 16, 2048)}
    out["act_quant k=4096"] = functools.partial(act_quant_args, 16, 4096)
    out.update({f"gemm_fp8b m={m}": functools.partial(gemm_fp8b_args, m, 4096, 4096) for m in (1, 2048)})
    out.update(extra_cases())
    return out


def elements_per_trip(name: str, cfg: LaunchConfig) -> int:
    """What one trip of the kernel's main loop covers: weights (GEMM/GEMV: BLOCK_N x BLOCK_K), cached
    K and V elements (attention: 2 x BLOCK_N x BLOCK_D), activations (act_quant: BLOCK)."""
    if name.startswith("attention"):
        return 2 * (cfg.block_n or 1) * (cfg.block_k or 1)
    if name.startswith("act_quant"):
        return cfg.block_n or 1
    return (cfg.block_n or 1) * (cfg.block_k or 1)


def case_format(name: str) -> tuple[str, int]:
    """(w_format, bits) of an all_cases() row in mpsim/sim/gpu/sass_table_fp.py: the trace's w_format
    for the GEMMs (fp8, fp8-block, nvfp4, mxfp4), `kv-fp8` for decode attention over the e4m3 cache,
    `act-fp8` for the per-token activation quantizer."""
    if name.startswith("attention"):
        return "kv-fp8", 8
    if name.startswith("act_quant"):
        return "act-fp8", 8
    if name.startswith("gemm_fp8b"):
        return "fp8-block", 8
    if name.startswith("gemm_fp8"):
        return "fp8", 8
    kind = name.split()[0].removeprefix("gemv_")
    if kind not in ("nvfp4", "mxfp4"):
        raise ValueError(f"case {name!r}: no format known for it")
    return kind, 4
