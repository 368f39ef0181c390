"""Count the per-weight instruction mix of the shipped GEMM/GEMV kernels from their sm_90a and sm_80 SASS.

    python scripts/sass_mix.py [--jobs N] [--check] [--arch sm_80] [--kernel FMT [--rows M] [--bits B]]

For every weight format (fp16, int{8,4,3,2}-group, anyprec at 2..8 bits) and each kernel path (the
GEMV with one activation row, the GEMV with 16 rows, the tiled GEMM), and for decode attention over
an fp16/int8/int4 KV cache (counted per cached K or V element), compile the kernel for sm_90a
and for sm_80 (the `arch` column: Ampere and Ada devices are priced from the sm_80 rows, Hopper and
Blackwell from the sm_90a rows, mpsim/sim/gpu/arch.py SASS_ARCH)
on the CPU (Triton's compiler with its bundled ptxas: no GPU or driver needed), disassemble the cubin
with the bundled nvdisasm, find the main K loop (the backward branch whose body holds the most
instructions) and count its instructions by issue pipe:

    fp32    FADD/FMUL/FFMA/FMNMX/FSEL/FSETP and the fp16x2 HADD2/HMUL2/HFMA2/HMNMX2   128 lanes/clk/SM
    alu     integer add/logic/shift/compare/select/permute, IMAD, MOV                     64
    cvt     I2F/I2FP/F2I/F2F/F2FP/FRND (type conversions)                                 16
    sfu     MUFU (exp2, rcp, ...)                                                          16
    lsu     LDG/STG/LDS/STS/LDSM/LDGSTS/ATOM/RED/SHFL (load/store and shuffles)           32
    tensor  HMMA/HGMMA (the tensor pipe; the model times it by FLOPs)                      -
    other   branches, barriers, uniform-datapath ops (one issue slot each, no lane pipe)  -

(rates: CUDA C++ Programming Guide, "Arithmetic Instructions", throughput table, compute capability
9.0; the GPU model takes each device's own fp32 and integer rates from its hardware file;
load/store: 4 x 8 LD/ST units per SM, H100 whitepaper SM diagram). Each warp runs the loop body
once per K trip, so a pipe's thread-ops per weight are count x 32 lanes x num_warps / (BLOCK_N x
BLOCK_K x T), T the K tiles one trip covers (the one-row partial sums: 4; else 1); uniform
and control instructions count once per warp (issue slots, `issue` below).

It writes mpsim/sim/gpu/sass_table_sm90a.py and sass_table_sm80.py (committed tables, joined by
mpsim/sim/gpu/sass_table.py, that the GPU model reads) and prints the rows.
`--check` recompiles one case of each architecture and exits non-zero if the committed table disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "mpsim" / "sim" / "gpu" / "sass_table.py"  # COLUMNS and ROWS: both files' rows
# one generated file of rows per architecture (a file under 400 lines each)
ARCHES = ("sm_90a", "sm_80")
ARCH_TABLES = {arch: TABLE.with_name(f"sass_table_{arch.replace('_', '')}.py") for arch in ARCHES}
FP_TABLE = ROOT / "mpsim" / "sim" / "gpu" / "sass_table_fp.py"
# the fp8 / fp4 kernels: Hopper, Ampere-class (what sm_80 devices are priced from) and Blackwell
FP_ARCHS = ("sm_90a", "sm_80", "sm_100a")
ARCH_NUMBER = {"sm_90a": 90, "sm_80": 80, "sm_100a": 100}
# on sm_80 only the kernels without fp8 conversions (Triton has no e4m3 there; an sm_80-class device
# has no fp8 tensor cores, so mpsim's W8A8 GEMMs and their quantizer are an error on it anyway):
# the FP4 weight-only GEMV and the fp8-KV decode (its codes decoded with integer ops)
FP_SM80 = ("gemv_nvfp4", "gemv_mxfp4", "attention_decode_fp8")
PIPES = ("fp32", "alu", "cvt", "sfu", "lsu", "tensor", "other")
# tiled-GEMM tiles counted besides the heuristic's, per architecture: three of the candidate set of
# kernels/launch_config.py (HOPPER_GEMM_TILES / AMPERE_GEMM_TILES)
GEMM_TILES = {"sm_90a": ((128, 256, 64, 8, 3), (128, 128, 32, 4, 4), (64, 64, 64, 4, 3)),
              "sm_80": ((128, 128, 32, 4, 3), (128, 128, 64, 8, 3), (64, 128, 32, 4, 4))}
# and any-precision's: the autotuner's candidates take K tiles of 32 (launch_config.gemm_candidates),
# which these neighbours of the heuristic's tile keep counted
ANYPREC_K32_TILES = {"sm_90a": ((128, 256, 32, 8, 3), (128, 128, 32, 8, 3), (64, 64, 32, 4, 3)),
                     "sm_80": ((128, 128, 32, 8, 3),)}
# the inline-asm one-row group GEMV (kernels/gemv_group_asm.py): the widths and GEMV tiles that take
# the fp16 partial sums (256 x 32: T = 4 K tiles per run; 64 x 64: T = 2)
ASM_BITS = (4, 3, 2)
# the one-row GEMVs' K loop both ways: as Triton leaves it (0: unpipelined, what the 2026-12-04 H200
# captures ran) and as the GPU configs run it now (tl.range(num_stages=3): kernels/launch_config.py
# LOOP_STAGES_KEY; 2 for any-precision at <= 3 bits: one_row_loops); the table's `loop_stages`
# column keeps them apart
ONE_ROW_LOOP_STAGES = (0, 3)
ASM_TILES = ((256, 32), (64, 64))

_FP32 = {"FADD", "FMUL", "FFMA", "FMNMX", "FSEL", "FSETP", "FSET", "FCHK", "FSWZADD", "HADD2",
         "HMUL2", "HFMA2", "HMNMX2", "HSETP2", "HSET2", "FMNMX3", "FADD2", "FMUL2", "FFMA2"}
_ALU = {"IADD3", "IADD", "LOP3", "LOP", "SHF", "SHL", "SHR", "ISETP", "IMNMX", "SEL", "LEA",
        "PRMT", "IABS", "SGXT", "BMSK", "IMAD", "IMUL", "MOV", "VIADD", "VIADDMNMX", "VIMNMX",
        "VIMNMX3", "IMNMX3", "P2R", "R2P", "PLOP3", "CS2R", "BFE", "BFI", "IDP", "IDP4A", "BREV",
        "FLO", "POPC", "XMAD", "ISCADD", "S2R", "IADD32I", "LOP32I", "VOTE", "VOTEU", "CCTL"}
_CVT = {"I2F", "I2FP", "F2I", "F2IP", "F2F", "F2FP", "FRND", "I2I", "I2IP"}
_SFU = {"MUFU"}
_LSU = {"LDG", "STG", "LDS", "STS", "LDSM", "STSM", "LDGSTS", "LD", "ST", "ATOM", "ATOMG", "ATOMS",
        "RED", "REDG", "SHFL", "LDL", "STL", "LDC", "ULDC", "UTMALDG", "UBLKCP", "SYNCS",
        "LDGDEPBAR", "MATCH", "REDUX"}
_TENSOR = {"HMMA", "HGMMA", "IMMA", "QGMMA", "WARPGROUP"}
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)(\S*)\s*([^;]*);")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_BRANCH_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def pipe_of(opcode: str) -> str:
    """The issue pipe of one SASS opcode (mnemonic without modifiers)."""
    if opcode.startswith("U") and opcode not in _ALU:  # uniform datapath: one issue slot per warp
        return "other"
    for name, group in (("fp32", _FP32), ("alu", _ALU), ("cvt", _CVT), ("sfu", _SFU),
                        ("lsu", _LSU), ("tensor", _TENSOR)):
        if opcode in group:
            return name
    return "other"


def main_loop(sass: str) -> list[str]:
    """Opcodes of the largest loop: from a label to the last backward branch to it."""
    labels: dict[str, int] = {}
    instrs: list[tuple[int, str, str]] = []  # (index, opcode, operands)
    pending: list[str] = []
    for line in sass.splitlines():
        m = _LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        i = _INSTR.search(line)
        if i:
            for lab in pending:
                labels[lab] = len(instrs)
            pending = []
            instrs.append((len(instrs), i.group(2), i.group(4)))
    best: tuple[int, int] = (0, -1)
    for idx, op, operands in instrs:
        if op != "BRA":
            continue
        t = _BRANCH_TARGET.search(operands)
        if t and t.group(1) in labels and labels[t.group(1)] <= idx:
            start = labels[t.group(1)]
            if idx - start > best[1] - best[0]:
                best = (start, idx)
    if best[1] < 0:
        raise ValueError("no backward branch: the K loop was not found in the SASS")
    return [op for _, op, _ in instrs[best[0]:best[1] + 1]]


def cases(arches: tuple[str, ...] = ARCHES) -> list[tuple[Any, ...]]:
    """(w_format, bits, group_size, M, N, K, tile, arch) per table row: the GEMV at 1 and 16 rows and
    the tiled GEMM, each at the launchers' heuristic tile (tile None) and the candidate tiles of
    kernels/launch_config.py (GEMV: GEMV_TILES, at 16 rows GEMV_ROW_TILES; GEMM: three of the
    architecture's tiles), the inline-asm one-row group GEMV ("intB-group-asm"), for each
    architecture."""
    from mpsim.kernels.launch_config import GEMV_ROW_TILES, GEMV_TILES

    formats: list[tuple[str, int, int | None]] = [("fp16", 16, None)]
    formats += [(f"int{b}-group", b, 128) for b in (8, 4, 3, 2)]
    formats += [("anyprec", b, None) for b in range(2, 9)]
    out: list[tuple[Any, ...]] = []
    for arch in arches:
        for fmt, bits, group in formats:
            for m in (1, 16):
                for bn, bk in GEMV_TILES if m == 1 else GEMV_ROW_TILES:
                    for loop in (one_row_loops(fmt, bits) if m == 1 else (0,)):
                        out.append((fmt, bits, group, m, 4096, 4096, (m, bn, bk, 4, 3, loop), arch))
            out.append((fmt, bits, group, 2048, 4096, 4096, None, arch))
            for tile in GEMM_TILES[arch] + (ANYPREC_K32_TILES[arch] if fmt == "anyprec" else ()):
                out.append((fmt, bits, group, 2048, 4096, 4096, tile, arch))
        for bits in ASM_BITS:
            for bn, bk in ASM_TILES:
                for loop in ONE_ROW_LOOP_STAGES:
                    out.append((f"int{bits}-group-asm", bits, 128, 1, 4096, 4096,
                                (1, bn, bk, 4, 3, loop), arch))
        out += kv_cases(arch)
    return out


def one_row_loops(fmt: str, bits: int) -> tuple[int, ...]:
    """A one-row GEMV's loop_stages counted: ONE_ROW_LOOP_STAGES, the pipelined one at the depth its
    GPU configs run (kernels/launch_config.py one_row_stages: 2 for any-precision at <= 3 bits)."""
    from mpsim.kernels.launch_config import _format_tag, one_row_stages

    return (0, one_row_stages(_format_tag(fmt), bits))


def kv_cases(arch: str) -> list[tuple[Any, ...]]:
    """Decode attention over fp16/int8/int4 K and V (contiguous cache), at its GPU config: one query
    head (MHA) and a GQA group of 16 rows, head_dim 64 and 128: ("kv", bits, None, BLOCK_G, D, arch)."""
    return [("kv", bits, None, bg, d, arch) for bits in (16, 8, 4) for bg in (1, 16)
            for d in (64, 128)]


def disassemble(compiled: Any) -> str:
    """The SASS of a triton.compile result (its cubin through the bundled nvdisasm)."""
    import triton

    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    try:
        return subprocess.run([triton.knobs.nvidia.nvdisasm.path, "-c", f.name], check=True,
                              capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)


def pipe_counts(ops: list[str]) -> dict[str, int]:
    """Instructions by issue pipe (PIPES) of a list of opcodes."""
    counts = dict.fromkeys(PIPES, 0)
    for op in ops:
        counts[pipe_of(op)] += 1
    return counts


def compile_case(case: tuple[Any, ...]) -> tuple[list[str], Any, str]:
    """Compile one case for its architecture (the case's last field, sm_90a or sm_80): its main
    loop's opcodes, its launch config and the whole SASS."""
    os.environ.pop("TRITON_INTERPRET", None)

    from mpsim.kernels.compile_sm90 import compile_sm90, launch_args, ptxas_report, serialized_wgmma

    *shape, arch = case
    if case[0] == "fp":  # the fp8 / fp4 kernels (kernels/compile_fp.py): --fp; ("fp", name, arch)
        from mpsim.kernels.compile_fp import all_cases
        kernel, args, cfg = all_cases()[case[1]]()
    elif case[0] == "kv":
        from mpsim.kernels.compile_sm90 import attention_decode_args
        kernel, args, cfg = attention_decode_args(case[1], case[3], case[4])
    elif case[0].endswith("-asm"):
        kernel, args, cfg = launch_args(case[0].removesuffix("-asm"), *shape[1:], asm=True)
    else:
        kernel, args, cfg = launch_args(*shape)
    compiled = compile_sm90(kernel, args, cfg, ARCH_NUMBER[arch])
    if ARCH_NUMBER[arch] >= 90:  # a loop whose wgmmas ptxas serialized is not what the model prices
        note = serialized_wgmma(ptxas_report(compiled, ARCH_NUMBER[arch]))
        if note:
            raise RuntimeError(f"case {case}: {note}")
    sass = disassemble(compiled)
    return main_loop(sass), cfg, sass


def count_case(case: tuple[Any, ...]) -> dict[str, Any]:
    """Compile one case (compile_case) and count its main loop's instructions per weight by pipe."""
    from mpsim.kernels.launch_config import gemv_trips, loop_stages_of

    ops, cfg, _ = compile_case(case)
    arch = case[-1]
    counts = pipe_counts(ops)
    lanes = 32 * cfg.num_warps
    # one trip of a one-row partial-sum loop covers T K tiles (kernels/gemv_group.py, gemm_anyprec.py)
    trips = gemv_trips("anyprec" if case[0] == "anyprec" else "group", case[1], case[2],
                       cfg.block_m, cfg.block_k) if (
        cfg.kernel in ("gemv_group_kernel", "gemv_group_asm_kernel", "gemv_anyprec_kernel")) else 1
    # decode attention: per cached element, K and V (2 x BLOCK_N tokens x BLOCK_D per trip)
    if case[0] == "fp":
        from mpsim.kernels.compile_fp import elements_per_trip
        weights = elements_per_trip(case[1], cfg)
    else:
        weights = cfg.block_n * cfg.block_k * (2 if case[0] == "kv" else trips)
    per_weight = {p: round(counts[p] * lanes / weights, 4) for p in PIPES}
    # uniform/control instructions take one issue slot per warp, not 32 lanes
    issue = sum(counts[p] for p in PIPES) * lanes / weights
    fmt, bits = case[0], case[1]
    if case[0] == "fp":
        from mpsim.kernels.compile_fp import case_format
        fmt, bits = case_format(case[1])
        return {"kernel": cfg.kernel, "w_format": fmt, "bits": bits, "block_m": cfg.block_m or 1,
                "block_n": cfg.block_n, "block_k": cfg.block_k or 1, "num_warps": cfg.num_warps,
                "loop_stages": loop_stages_of(cfg.extra), "loop_instructions": len(ops),
                **per_weight, "issue": round(issue, 4),
                "arch": arch}
    return {"arch": arch, "kernel": cfg.kernel,
            "w_format": fmt if fmt in ("fp16", "anyprec", "kv", "fp") else "group",
            "bits": bits, "block_m": cfg.block_m, "block_n": cfg.block_n, "block_k": cfg.block_k,
            "num_warps": cfg.num_warps, "loop_stages": loop_stages_of(cfg.extra),
            "loop_instructions": len(ops), **per_weight,
            "issue": round(issue, 4)}


def _module(doc: list[str], cols: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    """A generated table module: its docstring lines, COLUMNS and one ROWS tuple per row."""
    lines = ['"""' + doc[0], *doc[1:], '"""', "", "# ruff: noqa: E501", "", f"COLUMNS = {cols!r}",
             "ROWS = [", *(f"    {tuple(r[c] for c in cols)!r}," for r in rows), "]"]
    return "\n".join(lines) + "\n"


def render(rows: list[dict[str, Any]], arch: str) -> str:
    """The generated file of one architecture's rows (mpsim/sim/gpu/sass_table_<arch>.py)."""
    cols = ("arch", "kernel", "w_format", "bits", "block_m", "block_n", "block_k", "num_warps",
            "loop_stages", "loop_instructions", *PIPES, "issue")
    doc = [
        f"Per-weight instruction mix of the shipped GEMM/GEMV kernels' K loops, by issue pipe: {arch}.",
        "",
        f"Generated by scripts/sass_mix.py from the kernels' {arch} SASS (Triton's compiler, bundled",
        "ptxas and nvdisasm); do not edit by hand: rerun the script after changing a kernel. Values are",
        "thread-instructions per weight (lane-ops; `issue` counts every instruction of the loop body).",
        "mpsim/sim/gpu/sass_table.py joins the architectures' rows; mpsim/sim/gpu/arch.py SASS_ARCH",
        "says which rows price which GPU.",
    ]
    return _module(doc, cols, [r for r in rows if r["arch"] == arch])


def render_fp(rows: list[dict[str, Any]]) -> str:
    """mpsim/sim/gpu/sass_table_fp.py: the fp8 / fp4 kernels' rows, sass_table's COLUMNS + `arch`
    (one row per kernel, format, tile and arch: the first case's, so of the fp8 GEMM at M = 1 and
    16, which share a config, the M = 1 count: Triton specializes M = 1, and on sm_100a the two
    loops differ)."""
    cols = ("kernel", "w_format", "bits", "block_m", "block_n", "block_k", "num_warps",
            "loop_stages", "loop_instructions", *PIPES, "issue", "arch")
    doc = [
        "Per-element instruction mix of the fp8 / fp4 kernels' main loops (issue 26), by issue pipe.",
        "",
        "Generated by `scripts/sass_mix.py --fp --write` from the kernels' sm_90a, sm_80 and sm_100a SASS",
        "(kernels/compile_fp.py's cases; Triton's compiler, bundled ptxas and nvdisasm); do not edit by",
        "hand. Per weight (GEMM/GEMV), per cached K or V element (w_format kv-fp8) or per activation",
        "(act-fp8); COLUMNS are mpsim/sim/gpu/sass_table.py's plus `arch`.",
    ]
    seen: set[tuple[Any, ...]] = set()
    first = []
    for r in rows:
        key = tuple(r[c] for c in ("kernel", "w_format", "bits", "block_m", "block_n", "block_k",
                                   "num_warps", "loop_stages", "arch"))
        if key not in seen:
            seen.add(key)
            first.append(r)
    return _module(doc, cols, first)


def _recount(todo: list[tuple[Any, ...]], fmt: str | None, jobs: int,
             rows: int | None = None, bits: int | None = None) -> list[dict[str, Any]]:
    """The committed rows, those of format `fmt`'s cases (every format's if None; with `rows`
    activation rows, of width `bits`) among `todo` recounted."""
    sys.path.insert(0, str(ROOT))
    from mpsim.sim.gpu.sass_table import COLUMNS, ROWS
    old = [dict(zip(COLUMNS, r, strict=True)) for r in ROWS]
    mine = [c for c in todo if (fmt is None or c[0] == fmt) and (rows is None or c[3] == rows)
            and (bits is None or c[1] == bits)]
    if not mine:
        raise SystemExit(f"--kernel {fmt!r}: no case of that format; formats: "
                         f"{sorted({c[0] for c in todo})}")
    with ProcessPoolExecutor(jobs) as pool:
        new = list(pool.map(count_case, mine))
    tile = ("arch", "kernel", "bits", "block_m", "block_n", "block_k", "num_warps", "loop_stages")
    done = {tuple(r[c] for c in tile) for r in new}
    return [r for r in old if tuple(r[c] for c in tile) not in done] + new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="recompile one case, compare with the table")
    ap.add_argument("--only", help="print the rows of formats containing this text; write nothing")
    ap.add_argument("--kernel", help="recount only the cases of this format ('kv', 'int4-group', ...)"
                    " and keep the committed table's other rows")
    ap.add_argument("--fp", action="store_true", help="print the fp8 / fp4 kernels' rows (per weight, "
                    "per cached K/V element or per activation); write nothing")
    ap.add_argument("--write", action="store_true", help="with --fp: write mpsim/sim/gpu/sass_table_fp.py "
                    "(sm_90a, sm_80 and sm_100a rows)")
    ap.add_argument("--rows", type=int, help="with --kernel: only the cases with this many rows (M)")
    ap.add_argument("--bits", type=int, help="with --kernel: only the cases of this width")
    ap.add_argument("--arch", choices=ARCHES, help="count only this architecture's cases and keep the"
                    " committed table's other rows")
    args = ap.parse_args(argv)
    todo = cases((args.arch,) if args.arch else ARCHES)
    if args.fp:
        from mpsim.kernels.compile_fp import all_cases
        names = list(all_cases())
        fp_archs = FP_ARCHS if args.write else (args.arch or "sm_90a",)
        fp_cases = [("fp", n, a) for a in fp_archs for n in names if a != "sm_80" or n.startswith(FP_SM80)]
        with ProcessPoolExecutor(args.jobs) as pool:
            fp_rows = list(pool.map(count_case, fp_cases))
        for case, r in zip(fp_cases, fp_rows, strict=True):
            print(json.dumps({"case": case[1], **r}))
        if args.write:
            FP_TABLE.write_text(render_fp(fp_rows))
        return 0
    if args.only:
        with ProcessPoolExecutor(args.jobs) as pool:
            for r in pool.map(count_case, [c for c in todo if args.only in c[0]]):
                print(json.dumps(r))
        return 0
    if args.check:
        sys.path.insert(0, str(ROOT))
        from mpsim.sim.gpu.sass_table import COLUMNS, ROWS
        want = [dict(zip(COLUMNS, r, strict=True)) for r in ROWS]
        ok = True
        for arch in sorted({c[-1] for c in todo}):  # one case of each architecture
            mine = [c for c in todo if c[-1] == arch]
            got = count_case(mine[len(mine) // 2])
            ok = ok and got in want
            print(json.dumps(got), "matches the table" if got in want else "DIFFERS from the table")
        return 0 if ok else 1
    if args.kernel or args.arch:
        rows = _recount(todo, args.kernel, args.jobs, args.rows, args.bits)
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(count_case, todo))
    for arch, path in ARCH_TABLES.items():
        path.write_text(render(rows, arch))
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
