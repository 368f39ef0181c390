"""Compile the GEMM/GEMV kernels for sm_90a (or sm_80) on the CPU, with the arguments a launch would pass.

Triton's compiler and the ptxas and nvdisasm it bundles need no GPU: tests/kernels/test_kern_gemm_compile.py
checks registers and spills this way, scripts/sass_mix.py counts the SASS instruction mix (of the
GEMM/GEMV kernels and of decode attention over fp16/int8/int4 KV). Call it
without TRITON_INTERPRET set (the kernels are interpreted, not compiled, when it is). Integer arguments
get Triton's divisible-by-16 specialization when their value allows it, as a real launch's would.
"""

from __future__ import annotations

from typing import Any

from mpsim.kernels import gemm_anyprec, gemm_fp16, gemm_group
from mpsim.kernels.gemm_common import k_per_split
from mpsim.kernels.launch_config import (
    GEMM_GROUP_M,
    LaunchConfig,
    _fit_block_k,
    _format_tag,
    cdiv,
    gemm_config,
    gemv_k_unit,
    gemv_loop_stages,
    gemv_trips,
    loop_stages_of,
    lut_words_of,
    staged_extra,
    sz_words_of,
)
from mpsim.traces.accounting import padded_k

ARCH = 90
# the SASS architectures scripts/sass_mix.py counts (the `arch` column of mpsim/sim/gpu/sass_table.py)
# and the compute capability Triton is asked to target for each ("sm_90a": Triton adds the "a")
SASS_ARCHES = {"sm_90a": 90, "sm_80": 80}
POINTERS = {"x_ptr": "*fp16", "bias_ptr": "*fp16", "out_ptr": "*fp16", "ws_ptr": "*fp32",
            "cnt_ptr": "*i32", "w_ptr": "*fp16", "qw_ptr": "*i32", "s_ptr": "*fp16",
            "z_ptr": "*fp16", "sz_ptr": "*i32", "lut_ptr": "*fp16", "pair_ptr": "*i32",
            # scalars that are not i32: the one-row any-precision GEMV's x scale (gemv_anyprec.py)
            "x_down": "fp32", "x_up": "fp32"}


def launch_args(w_format: str, bits: int, group: int | None, m: int, n: int, k: int,
                tile: tuple[int, ...] | None = None,
                gemv_bias: bool = False, asm: bool = False) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(kernel, its arguments as a launch passes them, config) for one shape: gemm_config's choice,
    or `tile` (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages[, a one-row GEMV's loop_stages]) on the
    same path; `gemv_bias` gives the GEMV path a bias; `asm` takes the inline-asm one-row group
    GEMV (kernels/gemv_group_asm.py) in place of gemv_group_kernel. Pointers are the placeholder
    "ptr" (or None where the launch passes none)."""
    cfg = gemm_config(m, n, k, w_format, bits, group)
    if tile is not None:
        bm, bn, bk, warps, stages, *loop = tile  # loop: a one-row GEMV's loop_stages (0: none)
        tag = _format_tag(w_format)
        if cfg.kernel.startswith("gemv"):
            bk = _fit_block_k(bk, tag, group)
            cfg = LaunchConfig(cfg.kernel, (cdiv(n, bn), 1), cfg.block_m, bn, bk, warps, stages, 1,
                               extra=gemv_loop_stages(cfg.block_m or 1, loop[0] if loop else stages,
                                                      switch=False)
                               + staged_extra(tag, bits, group, cfg.block_m, bk))
        else:
            # quantized tiles take K tiles of 32, any-precision's its own (launch_config's small
            # any-precision tile is 64 x 64 x 64)
            bk = bk if tag in ("fp16", "anyprec") else _fit_block_k(32, tag, group)
            cfg = LaunchConfig(cfg.kernel, (cdiv(m, bm) * cdiv(n, bn),), bm, bn, bk, warps, stages,
                               group_m=GEMM_GROUP_M,
                               extra=staged_extra(tag, bits, group, bm, bk))
    gemv = cfg.kernel.startswith("gemv")
    bias = gemv and gemv_bias
    kp = padded_k(k, group)
    args: dict[str, Any] = dict(M=m, N=n, K=k, stride_xm=k, stride_om=n, HAS_BIAS=bias,
                                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                                bias_ptr="ptr" if bias else None, x_ptr="ptr", out_ptr="ptr")
    args.update(_word_args(cfg, asm))
    if gemv:
        if loop_stages_of(cfg.extra):
            args.update(LOOP_STAGES=loop_stages_of(cfg.extra))
        args.update(SPLIT_K=cfg.split_k, ws_ptr="ptr" if cfg.split_k > 1 else None,
                    cnt_ptr="ptr" if cfg.split_k > 1 else None,
                    K_PER_SPLIT=k_per_split(kp if w_format != "fp16" else k, cfg.split_k,
                                            gemv_k_unit(_format_tag(w_format), bits, group,
                                                        cfg.block_m, cfg.block_k or 1)))
    else:
        args.update(GROUP_M=cfg.group_m)
    if w_format == "fp16":
        args.update(w_ptr="ptr", stride_wn=k)
        module: Any = gemm_fp16
    elif w_format == "anyprec":
        args.update(_anyprec_args(bits, n, kp, gemv, cfg))
        module = gemm_anyprec
    else:
        if group is None:
            raise ValueError(f"{w_format}: a group format needs a group size")
        args.update(qw_ptr="ptr", s_ptr="ptr", z_ptr="ptr", KP=kp, stride_qn=kp * bits // 32,
                    stride_sn=kp // group, BITS=bits, GROUP=group)
        module = gemm_group
    fmt = {"fp16": "fp16", "anyprec": "anyprec"}.get(w_format, "group")
    if asm:
        from mpsim.kernels.gemv_group_asm import asm_args, asm_config, gemv_group_asm_kernel
        return gemv_group_asm_kernel, {**args, **asm_args(k, kp)}, asm_config(cfg, bits, group)
    return getattr(module, f"{'gemv' if gemv else 'gemm'}_{fmt}_kernel"), args, cfg


def _word_args(cfg: LaunchConfig, asm: bool) -> dict[str, Any]:
    """The arguments a config's word keys add: the group kernels' scale-zero words (sz_words,
    kernels/sz_words.py), any-precision's LUT words at lut_ptr (lut_words, kernels/lut_words.py)."""
    out: dict[str, Any] = {}
    if sz_words_of(cfg.extra) and not asm:
        out.update(SZ_WORDS=True, sz_ptr="ptr")
    if lut_words_of(cfg.extra):
        out.update(LUT_WORDS=True, __types__=dict(POINTERS, lut_ptr="*i32"))
    return out


def _anyprec_args(bits: int, n: int, kp: int, gemv: bool, cfg: LaunchConfig) -> dict[str, Any]:
    """The any-precision kernels' arguments; the one-row partial sums with x scaled by 2^-E (E > 0:
    a weight with max |lut| > 1/4, the common case; kernels/gemv_anyprec.py)."""
    out: dict[str, Any] = dict(qw_ptr="ptr", lut_ptr="ptr", pair_ptr="ptr", KP=kp,
                               stride_qp=n * kp // 32, stride_qn=kp // 32, stride_ln=1 << bits,
                               stride_pn=1 << (2 * bits), BITS=bits,
                               PAIR_BITS=gemm_anyprec.PAIR_MAX_BITS)
    if gemv and gemv_trips("anyprec", bits, None, cfg.block_m or 1, cfg.block_k or 1) > 1:
        out.update(x_down=0.125, x_up=8.0, X_SCALED=True)
    return out


ATTENTION_POINTERS = {"q_ptr": "*fp16", "o_ptr": "*fp16", "ks_ptr": "*fp16", "kz_ptr": "*fp16",
                      "vs_ptr": "*fp16", "vz_ptr": "*fp16", "lens_ptr": "*i32", "table_ptr": "*i32",
                      "ws_acc": "*fp32", "ws_ml": "*fp32", "counters": "*i32"}


def attention_decode_args(bits: int, block_g: int, head_dim: int,
                          paged: bool = False) -> tuple[Any, dict[str, Any], LaunchConfig]:
    """(kernel, arguments, config) of decode attention on a GPU (kernels/launch_config.py's
    attention_decode_config: BLOCK_N, warps and stages) over a bits-wide K and V cache (int8/int4
    codes as int32 words, fp16 values), one query head (block_g 1) or a GQA group of 16 rows, split
    KV. Strides are multiples of 16 (the divisibility a launch over such a cache infers)."""
    from mpsim.kernels import attention_decode
    from mpsim.kernels.launch_config import attention_decode_config

    group = 1 if block_g == 1 else block_g
    cfg = attention_decode_config(1, 32 * group, 32, head_dim, 8192, bits, 64 if paged else None)
    data = "*fp16" if bits == 16 else "*i32"
    args: dict[str, Any] = {name: "ptr" for name in ATTENTION_POINTERS}
    args.update(kd_ptr="ptr", vd_ptr="ptr", qk_scale=0.5, split_len=512, num_splits=16,
                ws_splits=16, GROUP=group, D=head_dim,
                K_BITS=bits, V_BITS=bits, PAGED=paged, KV_BLOCK=64, BLOCK_G=cfg.block_m,
                BLOCK_N=cfg.block_n, BLOCK_D=cfg.block_k, ONE_SPLIT=False)
    for name in attention_decode.attention_decode_kernel.arg_names:
        if name.startswith("stride"):
            args[name] = 16 * 1024
    types = dict(ATTENTION_POINTERS, kd_ptr=data, vd_ptr=data, qk_scale="fp32")
    args["__types__"] = types
    return attention_decode.attention_decode_kernel, args, cfg


def compile_sm90(kernel: Any, args: dict[str, Any], cfg: LaunchConfig, arch: int = ARCH) -> Any:
    """triton.compile of `kernel` for sm_90a (arch 90), sm_80 (arch 80) or sm_100a (arch 100, the
    fp8/fp4 kernels' compile test) with these arguments (launch_args) and cfg's warps and stages; the
    result holds .asm["ptx"], .asm["cubin"] and .metadata."""
    known = sorted({*SASS_ARCHES.values(), 100})
    if arch not in known:
        raise ValueError(f"arch {arch}: expected one of {known}")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if "PAIR_SWAP" in kernel.arg_names and "PAIR_SWAP" not in args:  # the launcher's choice
        from mpsim.kernels.gemv_group import pair_swap
        args = {**args, "PAIR_SWAP": pair_swap((arch // 10, arch % 10))}
    if "UNIT3_HIGH" in kernel.arg_names and "UNIT3_HIGH" not in args:  # the launcher's choice
        from mpsim.kernels.dot_tile import unit3_high
        args = {**args, "UNIT3_HIGH": unit3_high((arch // 10, arch % 10))}
    if "DOT_PAIRS" in kernel.arg_names and "DOT_PAIRS" not in args:  # the launcher's choice
        from mpsim.kernels.anyprec_dequant import dot_pairs
        args = {**args, "DOT_PAIRS": dot_pairs((arch // 10, arch % 10))}
    if "REG_PREFETCH" in kernel.arg_names and "REG_PREFETCH" not in args:  # the launcher's choice
        from mpsim.kernels.loop_stages import prefetched_in_registers
        args = {**args, "REG_PREFETCH": prefetched_in_registers("anyprec", int(args.get("BITS", 0)),
                                                                arch // 10)}
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    types = args.get("__types__", POINTERS)
    for i, param in enumerate(kernel.params):
        name = param.name
        # a constexpr with a default the launch leaves out (LOOP_STAGES unless the config asks)
        value = args[name] if name in args or not param.has_default else param.default
        if types.get(name, "").startswith("*") and value is not None:
            signature[name], attrs[(i,)] = types[name], [["tt.divisibility", 16]]
        elif types.get(name) == "fp32":
            signature[name] = "fp32"
        elif not param.is_constexpr and value is not None:
            signature[name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name], constexprs[(i,)] = "constexpr", value
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                          target=GPUTarget("cuda", arch, 32),
                          options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))


def ptxas_report(compiled: Any, arch: int = ARCH) -> str:
    """ptxas -v's report (registers, spills, notes) on a compile_sm90 result's PTX, from the newer of
    the two ptxas Triton bundles (`ptxas-blackwell`: it reads the PTX version Triton writes, for
    every architecture listed here), or its only one where a Triton ships one (the GPU kit may run
    an older Triton than this build machine's)."""
    import os
    import subprocess
    import tempfile

    import triton

    tool = getattr(triton.knobs.nvidia, "ptxas_blackwell", None) or triton.knobs.nvidia.ptxas
    gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(compiled.asm["ptx"])
    try:
        return subprocess.run([tool.path, "-v", f"--gpu-name={gpu}", f.name, "-o", os.devnull],
                              capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)


def ptxas_usage(report: str) -> dict[str, int]:
    """Registers per thread and spill-store bytes from ptxas_report's text."""
    import re

    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    if regs is None or spills is None:
        raise ValueError(f"ptxas -v: no register / spill line in its output: {report[-500:]}")
    return {"registers": int(regs.group(1)), "spill_bytes": int(spills.group(1))}


def serialized_wgmma(report: str) -> str | None:
    """ptxas's note that it serialized a kernel's wgmma instructions (C7515 and its kind: every
    wgmma then waits for the one before it, so the warpgroup's other work stops overlapping the
    tensor cores), or None. mpsim's kernels must not draw it: the simulator overlaps a loop's
    dequantization with its MMAs (kernels/gemm_common.py gemv_program's tl.assume)."""
    notes = [line.split(":", 1)[-1].strip() for line in report.splitlines()
             if "wgmma" in line and "serialized" in line]
    return notes[0] if notes else None
