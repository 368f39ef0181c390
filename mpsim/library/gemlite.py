"""GemLite's Triton A16Wn kernels (mobiusml/gemlite 0.4.1, as torchao's gemlite_uintx_weight_only
runs them in SGLang: `--torchao-config gemlite-<bits>-<group>`): kernel names, launch configs
(each architecture's default, the autotuner's candidate list) and the row builder; priced by
mpsim/sim/gpu/library/gemlite.py.

Sources (gemlite/ at 0d4c40e, v0.4.1; torchao's _matmul_type_fn, "logic taken from gemlite's
core.py"): the kernel by M: one row GEMV_REVSPLITK (W_nbits < 8), 2..64 rows GEMM_SPLITK, more
GEMM. gemv_revsplitK_A16fWnO16f_int32packing.py: no K loop, grid (N / BLOCK_N, K / (2 BLOCK_K)),
each program two BLOCK_K x BLOCK_N chunks, its partial added to the output with tl.atomic_add
(the output zeroed first by the autotuner's pre_hook, init_to_zero: a fill kernel);
gemm_splitK_A16fWnO16f_int32packing.py: grid (M / BLOCK_M x N / BLOCK_N, SPLIT_K), a K loop of
BLOCK_K tiles dealt round-robin over the splits, atomics (and the zero fill) when SPLIT_K > 1;
gemm_A16fWnO16f_int32packing.py: output tiles, a K loop, a plain store. Packed weights: 32 / bits
codes of one int32 along K; group >= 32, K and N multiples of 128 (GemLiteLinearTriton.__init__).
Every kernel autotunes by default (config.py AUTOTUNE_ENABLE: all True); `default_config` is the
config each file ships for the architecture (what runs with autotuning off), `candidates` the
autotuner's list after GemLite's own pruning (kernel_config_pruner); `mpsim op --config best`
and the engines validation pick the model's fastest of them.
"""

from __future__ import annotations

from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig, cdiv, next_pow2
from mpsim.library.rows import Row, apply_config, check_kernel, gemm_shape

GEMLITE_GEMV = "gemlite_gemv_revsplitk"
GEMLITE_GEMM_SPLITK = "gemlite_gemm_splitk"
GEMLITE_GEMM = "gemlite_gemm"
KERNELS = (GEMLITE_GEMV, GEMLITE_GEMM_SPLITK, GEMLITE_GEMM)
FORMATS = {"int2-group": 2, "int4-group": 4, "int8-group": 8}  # W_nbits 1 and 16 have no mpsim format
GEMV_MAX_ROWS, SPLITK_MAX_ROWS = 1, 64   # torchao _matmul_type_fn: > 64 GEMM, > 1 GEMM_SPLITK
MIN_GROUP = 32
SHAPE_MULTIPLE = 128
# get_default_config per compute capability: (8, 0) A100, (9, 0) H100, else the 4090's; the engine
# files' architectures map to them (ampere -> A100's, hopper -> H100's, ada and blackwell -> the
# 4090's): (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, warps, stages)
DEFAULTS = {
    GEMLITE_GEMV: {"ampere": (1, 512, 16, 1, 2, 2), "hopper": (1, 256, 16, 1, 2, 1),
                   "other": (1, 256, 32, 1, 4, 2)},
    GEMLITE_GEMM_SPLITK: {"ampere": (16, 64, 32, 2, 4, 1), "hopper": (16, 64, 32, 2, 4, 1),
                          "other": (16, 32, 32, 2, 4, 1)},
    GEMLITE_GEMM: {"any": (16, 32, 128, 1, 4, 1)},
}


def matmul_type(m: int, bits: int) -> str:
    """The kernel torchao's GemLite layout runs for an M-row call."""
    if m > SPLITK_MAX_ROWS:
        return GEMLITE_GEMM
    if m > GEMV_MAX_ROWS:
        return GEMLITE_GEMM_SPLITK
    if bits >= 8:
        raise ValueError("GemLite runs an 8-bit one-row call with GEMV_SPLITK (gemv_splitK_"
                         "A16fWnO16f_int32packing.py), which mpsim does not model")
    return GEMLITE_GEMV


def check_shape(kernel: str, n: int, k: int, bits: int, group: int) -> None:
    if bits not in FORMATS.values():
        raise ValueError(f"{kernel}: GemLite packs 2-, 4- or 8-bit weights here, got {bits}")
    if n % SHAPE_MULTIPLE or k % SHAPE_MULTIPLE:
        raise ValueError(f"{kernel}: GemLite needs N and K multiples of {SHAPE_MULTIPLE} "
                         f"(GemLiteLinearTriton: 'Invalid input shapes'), got N={n}, K={k}")
    if group < MIN_GROUP or k % group:
        raise ValueError(f"{kernel}: group size must be >= {MIN_GROUP} and divide K={k}, got {group}")


def _config(kernel: str, m: int, n: int, k: int, bm: int, bn: int, bk: int, split: int, warps: int,
            stages: int) -> LaunchConfig:
    """One launch: the grid GemLite's launcher computes; `zero_init` when outputs are atomic adds."""
    if kernel == GEMLITE_GEMV:
        grid: tuple[int, ...] = (cdiv(n, bn), cdiv(k, 2 * bk))
        atomic = 1
    elif kernel == GEMLITE_GEMM_SPLITK:
        grid, atomic = (cdiv(m, bm) * cdiv(n, bn), split), int(split > 1)
    else:
        grid, atomic = (cdiv(m, bm) * cdiv(n, bn),), 0
    return LaunchConfig(kernel, grid, bm, bn, bk, warps, stages, split, group_m=None
                        if kernel == GEMLITE_GEMV else 8, extra=(("zero_init", atomic),))


def _arch_key(kernel: str, arch: str) -> str:
    table = DEFAULTS[kernel]
    return "any" if "any" in table else arch if arch in table else "other"


def default_config(kernel: str, m: int, n: int, k: int, group: int,
                   arch: str = "hopper") -> LaunchConfig:
    """The config GemLite's file ships for the architecture, fitted as its pruner fits a tile
    (BLOCK_K <= group; BLOCK_M by M for the GEMMs)."""
    bm, bn, bk, split, warps, stages = DEFAULTS[kernel][_arch_key(kernel, arch)]
    if kernel != GEMLITE_GEMV:
        bm = _block_m(kernel, m, bm)
    return _config(kernel, m, n, k, bm, min(n, bn), min(bk, group), split, warps, stages)


def _block_m(kernel: str, m: int, bm: int) -> int:
    """GemLite's pruner, its steps in its order (each later one overrides): BLOCK_M by the next power
    of two of M (GEMM: at least 16); e.g. GEMM_SPLITK at M = 64 runs 32 rows, GEMM from 512 runs 128."""
    p = next_pow2(m) if kernel == GEMLITE_GEMM_SPLITK else max(next_pow2(m), 16)
    steps = ((32, 16, 32), (64, 32, 64)) if kernel == GEMLITE_GEMM_SPLITK else \
        ((32, 16, 32), (64, 32, 64), (128, 64, 128), (256, 64, 256), (512, 128, 256))
    if p <= 16:
        bm = 16
    for least, lo, hi in steps:
        if p >= least:
            bm = min(max(bm, lo), hi)
    return bm


def candidates(m: int, n: int, k: int, bits: int, group: int, sms: int = GPU_SMS,
               arch: str = "hopper") -> list[LaunchConfig]:
    """The autotuner's configs for the kernel M runs, after GemLite's pruning (area limits, BLOCK_K
    <= group, the GEMV's 2 BLOCK_K <= group, K a multiple of BLOCK_K x SPLIT_K). num_stages and the
    load-order / eviction options are left out: the model prices them alike (a GEMV has no loop to
    pipeline; a quantized W reaches tl.dot unpipelined), so one candidate per tile."""
    kernel = matmul_type(m, bits)
    check_shape(kernel, n, k, bits, group)
    out: dict[tuple[int, ...], LaunchConfig] = {}
    if kernel == GEMLITE_GEMV:
        for bn0 in (128, 256, 512):
            for bk0 in (8, 16, 32, 64):
                bn, bk = min(n, bn0), min(k, bk0)
                if not 1024 <= bn * bk <= 4096 * 8:
                    continue
                bk = min(bk, group)
                if 2 * bk > group or k % (2 * bk):
                    continue
                for warps in (2, 4):
                    out[(bn, bk, warps)] = _config(kernel, m, n, k, 1, bn, bk, 1, warps, 1)
        return list(out.values())
    p = next_pow2(m)
    splits = (1,) if kernel == GEMLITE_GEMM else (1, 2, 4, 8, 16)
    for bm0 in ((16, 32, 64) if kernel == GEMLITE_GEMM_SPLITK else (16, 32, 64, 128, 256)):
        for bn in (32, 64, 128, 256):
            for bk0 in (32, 64, 128, 256):
                if bn * bk0 > (4096 * 8 if kernel == GEMLITE_GEMM_SPLITK else 4096 * 4):
                    continue
                bm, bk = _block_m(kernel, m, bm0), min(bk0, group)
                for split0 in splits:
                    split = split0 if kernel == GEMLITE_GEMM else (
                        min(split0, 8) if p >= 32 else max(split0, 2) if p <= 16 else split0)
                    if k % (bk * split):
                        continue
                    for warps in (4, 8):
                        out[(bm, bn, bk, split, warps)] = _config(kernel, m, n, k, bm, bn, bk,
                                                                  split, warps, 1)
    return list(out.values())


def gemm_row(kernel: str, m: int, n: int, k: int, fmt: str, bits: int, group_size: int | None,
             bias: bool, *, on_gpu: bool, config: LaunchConfig | None, sms: int,
             arch: str = "hopper") -> Row:
    """A GemLite row: the kernel M runs (an error naming it when `kernel` is another), config
    `config` or the architecture's default."""
    if fmt not in FORMATS:
        raise ValueError(f"{kernel} prices group-wise {sorted(FORMATS)} weights, got {fmt}")
    group = group_size or k
    runs = matmul_type(m, bits)
    if kernel != runs:
        raise ValueError(f"GemLite runs {runs} for M={m}, not {kernel}")
    check_shape(kernel, n, k, bits, group)
    cfg = config or default_config(kernel, m, n, k, group, arch)
    check_kernel(cfg, kernel)
    return apply_config(gemm_shape(m, n, k, fmt, bits, group, bias), cfg)
