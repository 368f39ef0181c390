"""GemLite 0.4.1 on a GPU against mpsim's gemlite room (mpsim/library/gemlite.py): its kernels as
SGLang's torchao path runs them, timed, beside the room's price at the config GemLite's autotuner
chose and at the model's own pick. What the GPU kit's `gemlite` step runs (scripts/gpu-check.sh).

    python -m mpsim.analysis.bench.gemlite_gpu --out bench_gemlite.csv [--hw h200-sxm]
        [--rows 1,32] [--repeats 50] [--dry-run]

Shapes: llama-3-8b's four decode GEMMs (qkv 6144 x 4096, o 4096 x 4096, gate_up 28672 x 4096,
down 4096 x 14336), int4 weights, group 64 (engine-benchmarks E5's `gemlite-4-64`), M = 1 (GEMV_
REVSPLITK) and 32 (GEMM_SPLITK). Each call is GemLiteLinearTriton's forward (the output's zero fill
and the kernel), timed by analysis/bench/timing.py (cold L2, CUDA events, median). GemLite
autotunes by default; the config it chose is read from its Triton autotuner. The checks this
answers: is the one-row GEMV bound by its int -> fp16 conversions (docs/kernels-weight-only.md
#gemlite), and do the split-K GEMMs run lock-step trips as mpsim's own Triton GEMMs measured.

GemLite is not a dependency: the kit installs its sdist from the carried wheels folder
(scripts/gpu-check-wheels.sh); without it, or without CUDA, the GPU columns are empty and the
`status` column says why (a `--dry-run` prices the rooms' configs only). GemLite 0.4.1 imports
Python's `imp` (gone in 3.12): a stand-in module with `reload` is put in its place, nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import types
from pathlib import Path
from typing import Any

from mpsim.hw_models.loader import load_hardware
from mpsim.kernels.launch_config import LaunchConfig
from mpsim.launch_plan import gemm_row
from mpsim.library import gemlite as gl
from mpsim.sim.best_config import best_gemm_row
from mpsim.sim.launch import simulate_launch

SHAPES = (("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336))
BITS, GROUP = 4, 64
COLUMNS = ("module", "m", "n", "k", "kernel", "gemlite_config", "status", "median_us", "p10_us",
           "p90_us", "timer", "predicted_us", "model_config", "model_us")
MODULES = {gl.GEMLITE_GEMV: "gemv_revsplitK_A16fWnO16f_int32packing",
           gl.GEMLITE_GEMM_SPLITK: "gemm_splitK_A16fWnO16f_int32packing",
           gl.GEMLITE_GEMM: "gemm_A16fWnO16f_int32packing"}


def priced_us(kernel: str, m: int, n: int, k: int, cfg: LaunchConfig | None, hw_name: str) -> float:
    """The room's price of one launch (zero fill and kernel, graph protocol) at `cfg` (None: the
    shipped default)."""
    row = gemm_row(m, n, k, "int4-group", BITS, GROUP, False, kernel=kernel, config=cfg)
    return simulate_launch(row, load_hardware(hw_name)).time_s * 1e6


def as_config(kernel: str, m: int, n: int, k: int, meta: dict[str, Any], warps: int) -> LaunchConfig:
    """GemLite's chosen Triton config as the room's LaunchConfig (its launcher's grid)."""
    return gl._config(kernel, m, n, k, int(meta.get("BLOCK_SIZE_M", 1)), int(meta["BLOCK_SIZE_N"]),
                      int(meta["BLOCK_SIZE_K"]), int(meta.get("SPLIT_K", 1)), warps, 1)


def import_gemlite() -> Any:
    """GemLite's core module, or ImportError naming why not."""
    if "imp" not in sys.modules:  # GemLite 0.4.1's triton_kernels/config.py: `import imp` (3.12 has none)
        sys.modules["imp"] = types.SimpleNamespace(reload=importlib.reload)  # type: ignore[assignment]
    return importlib.import_module("gemlite.core")


def measure(core: Any, m: int, n: int, k: int, repeats: int, warmup: int) -> tuple[Any, dict[str, Any], int]:
    """(Timing, the autotuner's chosen config kwargs, its warps) of GemLite's forward for an M-row call."""
    import torch

    from mpsim.analysis.bench.timing import Timer

    dev = torch.device("cuda")
    layer = core.GemLiteLinearTriton(BITS, GROUP, k, n, input_dtype=core.DType.FP16,
                                     output_dtype=core.DType.FP16)
    codes = torch.randint(0, 2**BITS, (n, k), dtype=torch.uint8, device=dev)
    scales = torch.rand(n, k // GROUP, dtype=torch.float16, device=dev) * 0.01
    zeros = torch.full((n, k // GROUP), 8.0, dtype=torch.float16, device=dev)
    layer.pack(codes, scales, zeros)
    x = torch.randn(m, k, dtype=torch.float16, device=dev)
    timing = Timer(dev, repeats, warmup).time(lambda: layer(x))
    module = importlib.import_module(f"gemlite.triton_kernels.{MODULES[gl.matmul_type(m, BITS)]}")
    kernel = next(v for name, v in vars(module).items() if name.endswith("_kernel"))
    best = getattr(kernel, "best_config", None)
    return timing, dict(best.kwargs) if best else {}, int(best.num_warps) if best else 0


def rows(hw_name: str, ms: list[int], dry: bool, repeats: int, warmup: int) -> list[dict[str, Any]]:
    core, status = None, "dry run: no GPU" if dry else ""
    if not dry:
        try:
            import torch

            if not torch.cuda.is_available():
                status = "skipped: no CUDA device"
            else:
                core = import_gemlite()
        except ImportError as exc:
            status = f"skipped: gemlite not importable ({exc})"
    out = []
    for m in ms:
        kernel = gl.matmul_type(m, BITS)
        for name, n, k in SHAPES:
            row: dict[str, Any] = dict.fromkeys(COLUMNS, "")
            row.update(module=name, m=m, n=n, k=k, kernel=kernel, status=status or "ok")
            cfg = None
            if core is not None:
                try:
                    timing, meta, warps = measure(core, m, n, k, repeats, warmup)
                    row.update(median_us=timing.median_us, p10_us=timing.p10_us, p90_us=timing.p90_us,
                               timer=timing.timer, gemlite_config=str(meta | {"num_warps": warps}))
                    cfg = as_config(kernel, m, n, k, meta, warps) if meta else None
                except Exception as exc:  # a GemLite failure is this row's result, said in it
                    row["status"] = f"failed: {type(exc).__name__}: {exc}"[:300]
            row["predicted_us"] = priced_us(kernel, m, n, k, cfg, hw_name)
            best = best_gemm_row(m, n, k, "int4-group", BITS, GROUP, hw=load_hardware(hw_name), kernel=kernel)
            row.update(model_config=best.config.name(), model_us=best.predicted_s * 1e6)
            out.append(row)
            print(f"{name} m={m}: {row['status']} measured {row['median_us'] or '-'} us, "
                  f"room {row['predicted_us']:.1f} us, model's pick {row['model_us']:.1f} us", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hw", default="h200-sxm")
    ap.add_argument("--rows", default="1,32")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--dry-run", action="store_true", help="price the rooms' configs only (no GPU)")
    args = ap.parse_args(argv)
    table = rows(args.hw, [int(m) for m in args.rows.split(",")], args.dry_run, args.repeats, args.warmup)
    import csv

    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(table)
    tmp.replace(args.out)
    print(f"wrote {args.out} ({len(table)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
