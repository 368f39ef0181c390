"""The opcodes of one shipped GEMM/GEMV kernel's K loop, by issue pipe, as scripts/sass_mix.py counts them.

    python scripts/sass_opcodes.py FORMAT BITS GROUP M BLOCK_N BLOCK_K LOOP_STAGES [--arch sm_80]
    python scripts/sass_opcodes.py anyprec 4 none 1 64 128 3

FORMAT as sass_mix's cases name it (fp16, int4-group, anyprec, ...; GROUP `none` for fp16 and
any-precision), LOOP_STAGES 0 for the loop as Triton leaves it (one-row GEMVs: the pipelined depth
their GPU configs run, kernels/loop_stages.py). Prints the loop's length, each opcode's count and
pipe (sass_mix.pipe_of), and the per-pipe totals, whose per-weight values are the table's row for
the case (docs/kernels.md). `--sass FILE` also writes the whole disassembly. What it is for: seeing
which instructions a kernel change adds or removes before recounting the table.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_mix  # a sibling script, found through the path above


def loop_opcodes(fmt: str, bits: int, group: int | None, m: int, block_n: int, block_k: int,
                 loop: int, arch: str = "sm_90a") -> tuple[list[str], str]:
    """The K loop's opcodes (in order) and the kernel's whole SASS: sass_mix's case at this tile."""
    ops, _, sass = sass_mix.compile_case((fmt, bits, group, m, 4096, 4096,
                                          (m, block_n, block_k, 4, 3, loop), arch))
    return ops, sass


def report(ops: list[str]) -> str:
    """One line per opcode (count, pipe), most frequent first, then the totals by pipe."""
    counts = Counter(ops)
    lines = [f"K loop: {len(ops)} instructions"]
    lines += [f"{op:12s} {n:6d}  {sass_mix.pipe_of(op)}" for op, n in counts.most_common()]
    by_pipe = sass_mix.pipe_counts(ops)
    lines.append("by pipe: " + ", ".join(f"{p} {n}" for p, n in by_pipe.items() if n))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("format")
    ap.add_argument("bits", type=int)
    ap.add_argument("group", help="the group size, or `none`")
    ap.add_argument("m", type=int)
    ap.add_argument("block_n", type=int)
    ap.add_argument("block_k", type=int)
    ap.add_argument("loop_stages", type=int)
    ap.add_argument("--arch", choices=sass_mix.ARCHES, default="sm_90a")
    ap.add_argument("--sass", type=Path, help="also write the whole disassembly here")
    args = ap.parse_args(argv)
    group = None if args.group == "none" else int(args.group)
    ops, sass = loop_opcodes(args.format, args.bits, group, args.m, args.block_n, args.block_k,
                             args.loop_stages, args.arch)
    print(report(ops))
    if args.sass:
        args.sass.write_text(sass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
