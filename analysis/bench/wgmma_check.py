"""The GPU kit's compile check: mpsim's tensor-core K loops compiled by the machine's own Triton and
ptxas, with ptxas's report (registers, spills, and whether it serialized the loop's wgmmas).

    python -m mpsim.analysis.bench.wgmma_check --out wgmma_check.csv [--arch 90] [--dry-run]

The simulator overlaps a quantized loop's dequantization with its MMAs, which holds on Hopper only
while ptxas leaves the loop's wgmmas unserialized (docs/kernels.md#unserialized-wgmma). This build
machine checks that with Triton 3.9's compiler (tests/kernels/test_kern_gemm_compile.py,
scripts/sass_mix.py); a GPU machine may run another Triton (3.6 on the lent H200s), whose lowering
of the same `tl.assume` is not checked here: this step compiles the launchers' heuristic configs of
every tensor-core loop (2..16-row GEMVs and tiled GEMMs of every weight format, the fp8 / fp4 ones)
for the device's architecture (`--arch`, default the GPU's, else 90) and writes one row per loop.
No GPU is needed (`--dry-run` compiles two cases). Exit status 1 when a loop is serialized or fails
to compile; its row says which.

Rows: case, kernel, config, arch, registers, spill_bytes, serialized (ptxas's note, empty when
none), status (ok, or the error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from mpsim.traces.atomic import write_csv_atomic

COLUMNS = ("case", "kernel", "config", "arch", "registers", "spill_bytes", "serialized", "status")
# (w_format, bits, group, M, N, K) at the launchers' heuristic configs: the 16-row GEMVs and the
# tiled GEMMs of every format (vicuna-7b's 11008 x 4096 up-projection)
GEMM_CASES = [(fmt, bits, group, m, 11008, 4096)
              for m in (16, 2048)
              for fmt, bits, group in (("fp16", 16, None), ("int8-group", 8, 128),
                                       ("int4-group", 4, 128), ("int3-group", 3, 128),
                                       ("int2-group", 2, 128), ("anyprec", 4, None),
                                       ("anyprec", 3, None), ("anyprec", 2, None))]
DRY_CASES = [("int4-group", 4, 128, 16, 11008, 4096), ("int4-group", 4, 128, 2048, 11008, 4096)]
FP_PREFIXES = ("gemm_fp8 ", "gemm_fp8b ", "gemv_nvfp4 ", "gemv_mxfp4 ")  # compile_fp.all_cases names


def _report(name: str, build: Callable[[], tuple[Any, dict[str, Any], Any]], arch: int) -> dict[str, Any]:
    """Compile one case for `arch` and read ptxas -v's report on its PTX (kernels/compile_sm90.py)."""
    from mpsim.kernels.compile_sm90 import compile_sm90, ptxas_report, ptxas_usage, serialized_wgmma

    row: dict[str, Any] = {"case": name, "arch": arch, "kernel": "", "config": "", "registers": None,
                           "spill_bytes": None, "serialized": "", "status": "ok"}
    try:
        kernel, args, cfg = build()
        row.update(kernel=cfg.kernel, config=cfg.name())
        report = ptxas_report(compile_sm90(kernel, args, cfg, arch), arch)
        usage = ptxas_usage(report)
    except Exception as exc:  # the row says what failed; the step's exit status flags it
        row["status"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return row
    row.update(**usage, serialized=serialized_wgmma(report) or "")
    return row


def cases(dry_run: bool) -> list[tuple[str, Callable[[], tuple[Any, dict[str, Any], Any]]]]:
    """(name, build) of every loop checked: build() gives (kernel, arguments, config)."""
    from mpsim.kernels.compile_fp import all_cases
    from mpsim.kernels.compile_sm90 import launch_args

    out: list[tuple[str, Callable[[], tuple[Any, dict[str, Any], Any]]]] = []
    for case in DRY_CASES if dry_run else GEMM_CASES:
        out.append((f"{case[0]} b{case[1]} m={case[3]} {case[4]}x{case[5]}", partial(launch_args, *case)))
    if not dry_run:
        out += [(name, build) for name, build in all_cases().items()
                if name.startswith(FP_PREFIXES) and "m=1" not in name.split()]
    return out


def device_arch() -> int:
    """The GPU's compute capability as compile_sm90 takes it (90 for Hopper), else 90."""
    import torch

    if not torch.cuda.is_available():
        return 90
    major, minor = torch.cuda.get_device_capability()
    return 10 * major + minor


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="CSV to write")
    ap.add_argument("--arch", type=int, help="compute capability to compile for (90, 80, 100)")
    ap.add_argument("--dry-run", action="store_true", help="two cases (the kit's CPU rehearsal)")
    args = ap.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # compiled, not interpreted (compile_sm90)
    arch = args.arch or device_arch()
    table = pd.DataFrame([_report(name, build, arch) for name, build in cases(args.dry_run)],
                         columns=list(COLUMNS))
    write_csv_atomic(table, args.out, index=False)
    print(table.to_string(index=False))
    bad = table[(table["status"] != "ok") | (table["serialized"] != "")]
    if len(bad):
        print(f"{len(bad)} of {len(table)} loops serialized or not compiled: {list(bad['case'])}")
    return 1 if len(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
