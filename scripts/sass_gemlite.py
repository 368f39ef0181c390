"""Count GemLite's Triton W4A16 kernels' per-weight instruction mix from their sm_90a SASS.

    python scripts/sass_gemlite.py --gemlite PATH [--write] [--jobs N]

PATH is a checkout of mobiusml/gemlite at v0.4.1 (commit 0d4c40e, the version the PyTorch post of
2025-01-21 ran: engine-benchmarks E5); nothing of it is copied into mpsim. Each kernel is compiled
for sm_90a on the CPU (Triton's compiler and bundled ptxas, no GPU) with the arguments GemLite's
launcher passes for an int32-packed, group-wise asymmetric weight (W_group_mode 3: (q - z) * s),
fp16 activations, fp16 accumulation (GEMLITE_ACC_DTYPE for fp16 input) and contiguous data, at
M = 1 (GEMV_REVSPLITK), 32 (GEMM_SPLITK) and 1024 (GEMM), N = K = 4096, group 64. The counting
(pipes, loop detection) is scripts/sass_mix.py's. The GEMV has no K loop: its whole kernel is
counted per weight (two BLOCK_K x BLOCK_N chunks); the GEMMs' main loop per weight of one
BLOCK_K x BLOCK_N tile, compiled with num_stages 1 (the GPU model runs a quantized W through
Triton's tl.dot unpipelined: docs/validation.md#mpsims-own-kernels-on-an-h200).

`--write` rewrites mpsim/sim/gpu/library/gemlite_sass.py (the table the gemlite room reads).
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "mpsim/sim/gpu/library/gemlite_sass.py"
POINTERS = {"a_ptr": "*fp16", "b_ptr": "*i32", "c_ptr": "*fp16", "scales_ptr": "*fp16",
            "zeros_ptr": "*fp16", "scales_a_ptr": "*fp16"}
COLUMNS = ("kernel", "bits", "block_m", "block_n", "block_k", "num_warps", "fp32", "alu", "cvt",
           "lsu", "issue")
# (kernel, bits, BLOCK_M, BLOCK_N, BLOCK_K, warps): GemLite's autotune tiles at group 64
CASES = [("gemv", b, 1, bn, bk, w) for b in (2, 4) for bn in (128, 256, 512) for bk in (8, 16, 32)
         for w in (2, 4)] \
    + [("splitk", b, bm, bn, bk, w) for b in (2, 4, 8) for bm in (16, 32) for bn in (64, 256)
       for bk in (32, 64) for w in (4, 8)] \
    + [("gemm", b, bm, bn, 64, w) for b in (2, 4, 8) for bm in (64, 128) for bn in (64, 128)
       for w in (4, 8)]
NAMES = {"gemv": "gemlite_gemv_revsplitk", "splitk": "gemlite_gemm_splitk", "gemm": "gemlite_gemm"}


def _import(gemlite: Path) -> dict[str, Any]:
    """GemLite's three kernels' JIT functions (its modules ask the CUDA device for its compute
    capability and name at import: answered as an H100's)."""
    import torch

    torch.cuda.get_device_capability = lambda *a: (9, 0)  # type: ignore[assignment]
    torch.cuda.get_device_properties = (  # type: ignore[assignment]
        lambda *a: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3"))
    sys.path.insert(0, str(gemlite))
    from gemlite.triton_kernels import (  # type: ignore[import-not-found]
        gemm_A16fWnO16f_int32packing as gg,
    )
    from gemlite.triton_kernels import gemm_splitK_A16fWnO16f_int32packing as gs
    from gemlite.triton_kernels import gemv_revsplitK_A16fWnO16f_int32packing as gv

    return {"gemv": gv.gemv_revsplitK_A16fWnO16f_int32packing_kernel.fn,
            "splitk": gs.gemm_splitK_A16fWnO16f_int32packing_kernel.fn,
            "gemm": gg.gemm_A16fWnO16f_int32packing_kernel.fn}


def _args(kind: str, bits: int, bm: int, bn: int, bk: int) -> dict[str, Any]:
    import triton.language as tl

    m = {"gemv": 1, "splitk": 32, "gemm": 1024}[kind]
    n = k = 4096
    args: dict[str, Any] = dict(
        M=m, N=n, K=k, W_nbits=bits, group_size=64, unpack_mask=2 ** bits - 1,
        elements_per_sample=32 // bits, stride_am=k, stride_ak=1, stride_bk=n, stride_bn=1,
        stride_cm=n, stride_cn=1, stride_meta_g=n, stride_meta_n=1, input_dtype=tl.float16,
        output_dtype=tl.float16, acc_dtype=tl.float16, meta_dtype=tl.float16, channel_scale_mode=0,
        W_group_mode=3, zero_is_scalar=False, data_contiguous=True, BLOCK_SIZE_M=bm,
        BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, meta_evict_policy="")
    if kind == "gemv":
        args.update(A_load_order=1, atomic_mode="relaxed", dot_prod_mode=0, dump_b_val=0)
    elif kind == "splitk":
        args.update(GROUP_SIZE_M=8, SPLIT_K=2, A_load_order=0, atomic_mode="relaxed")
    else:
        args.update(GROUP_SIZE_M=8, A_load_order=2)
    return args


def count(case: tuple[Any, ...], gemlite: str) -> dict[str, Any]:
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(ROOT / "scripts"))
    from sass_mix import _INSTR, disassemble, main_loop, pipe_counts

    kind, bits, bm, bn, bk, warps = case
    fn = _import(Path(gemlite))[kind]
    args = _args(kind, bits, bm, bn, bk)
    sig: dict[str, str] = {}
    cons: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, p in enumerate(fn.params):
        v = args.get(p.name)
        if p.name in POINTERS:
            sig[p.name], attrs[(i,)] = POINTERS[p.name], [["tt.divisibility", 16]]
        elif p.is_constexpr or v == 1:  # the launcher specializes integer 1s
            sig[p.name], cons[(i,)] = "constexpr", v
        else:
            sig[p.name] = "i32"
            if v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(fn, sig, cons, attrs), target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=warps, num_stages=1))
    sass = disassemble(compiled)
    if kind == "gemv":  # no K loop: the whole kernel, two chunks
        ops = [m.group(2) for m in map(_INSTR.search, sass.splitlines()) if m]
        weights = 2 * bk * bn
    else:
        ops = main_loop(sass)
        weights = bk * bn
    counts = pipe_counts(ops)
    lanes = 32 * warps
    out = {"kernel": NAMES[kind], "bits": bits, "block_m": bm, "block_n": bn, "block_k": bk,
           "num_warps": warps}
    out.update({p: round(counts[p] * lanes / weights, 4) for p in ("fp32", "alu", "cvt", "lsu")})
    out["issue"] = round(sum(counts.values()) * lanes / weights, 4)
    return out


def render(rows: list[dict[str, Any]], triton_version: str) -> str:
    head = [
        '"""Per-weight instruction mix of GemLite 0.4.1\'s Triton kernels by issue pipe, sm_90a.',
        "",
        "Generated by scripts/sass_gemlite.py from a compile of mobiusml/gemlite at 0d4c40e (v0.4.1)",
        f"with Triton {triton_version} on the CPU; do not edit by hand. Lane-ops per weight; the GEMV",
        "row is its whole kernel (no K loop), the GEMM rows their main loop at num_stages 1.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "",
        f"COLUMNS = {COLUMNS!r}",
        "ROWS = [",
    ]
    body = [f"    {tuple(r[c] for c in COLUMNS)!r}," for r in rows]
    return "\n".join([*head, *body, "]", ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemlite", required=True, help="a checkout of mobiusml/gemlite at 0d4c40e")
    ap.add_argument("--write", action="store_true", help=f"rewrite {TABLE.relative_to(ROOT)}")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    if not (Path(args.gemlite) / "gemlite/triton_kernels/gemv_revsplitK_A16fWnO16f_int32packing.py").exists():
        ap.error(f"--gemlite {args.gemlite}: no gemlite/triton_kernels/"
                 "gemv_revsplitK_A16fWnO16f_int32packing.py there (expected v0.4.1, commit 0d4c40e)")
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(count, CASES, [args.gemlite] * len(CASES)))
    import triton

    text = render(rows, triton.__version__)
    if args.write:
        tmp = TABLE.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(TABLE)
        print(f"wrote {TABLE.relative_to(ROOT)} ({len(rows)} rows)")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
