"""GPU benchmark of the weight-only GEMV/GEMM kernels at Llama-7B (Vicuna-7B), Llama-3-8B and
MobileLLaMA-1.4B shapes.

For every projection (qkv, o, gate, up, gate_up, down, lm_head) and M in {1, 4, 16}: the median time
of each weight format (fp16 Triton, int8/4/3/2 group 128, any-precision 4/3/2 from a parent of 4),
on a GPU also the inline-asm one-row group GEMV (impl "triton-asm", kernels/gemv_group_asm.py, where
the launcher's config takes it), of each one-row config with the K loop unpipelined (impl
"triton-plain-loop": the same config without `loop_stages`, docs/kernels.md#pipelined-k-loops), of
each group config that reads scale-zero words with the 2-byte loads instead (impl
"triton-2byte-scales": the same config without `sz_words`) and of each any-precision config that
reads LUT words with the fp16 LUT (impl "triton-fp16-lut": without `lut_words`;
docs/kernels.md#staged-scales),
of torch's fp16 linear (cuBLAS), and of a device-to-device copy of
the bytes the format reads (the bandwidth ceiling); achieved GB/s and the ratio to fp16 (mpsim's
Triton fp16 kernel: speedup_vs_triton_fp16; cuBLAS: speedup_vs_torch_fp16).
Cold L2 and CUDA-event medians (analysis/bench/timing.py). Writes a tidy CSV with
the device and the torch/triton versions on every row.

    python -m mpsim.analysis.bench.kernels --out out/bench_kernels.csv      # needs a CUDA device
    python -m mpsim.analysis.bench.kernels --dry-run --out out/dry.csv      # CPU: interpreter, tiny

Weights hold random bits (every bit pattern is a valid packed weight): timing does not depend on the
values, and quantizing 7B-sized matrices would take longer than the benchmark.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mpsim.analysis.bench.attention import bench_attention
from mpsim.analysis.bench.timing import CsvTable, Timer, Timing, copy_fn, environment
from mpsim.traces.accounting import launch_cost, weight_bytes


@dataclass(frozen=True)
class ModelDims:
    hidden: int
    ffn: int
    vocab: int
    kv_hidden: int | None = None  # K and V width (GQA); None: hidden (MHA)


MODELS = {
    "vicuna-7b": ModelDims(4096, 11008, 32000),
    # meta-llama/Meta-Llama-3-8B config.json: hidden 4096, intermediate 14336, 8 of 32 heads for K/V
    # (head_dim 128: 1024 wide), vocab 128256
    "llama-3-8b": ModelDims(4096, 14336, 128256, 1024),
    "mobilellama-1.4b": ModelDims(2048, 5632, 32000),
    "tiny": ModelDims(128, 256, 160),  # the --dry-run model: interpreter-sized, K % 128 == 0
}


@dataclass(frozen=True)
class Format:
    label: str
    w_format: str
    bits: int
    group_size: int | None


GROUP = 128
ANYPREC_PARENT = 4
FORMATS = (
    Format("fp16", "fp16", 16, None),
    *(Format(f"int{b}-g{GROUP}", f"int{b}-group", b, GROUP) for b in (8, 4, 3, 2)),
    *(Format(f"ap{b}/{ANYPREC_PARENT}", "anyprec", b, None) for b in (4, 3, 2)),
)
COLUMNS = (
    "device", "torch_version", "triton_version", "cuda_version", "host", "model", "module", "m", "n",
    "k", "impl", "format", "w_format", "w_bits", "group_size", "kernel", "config", "bytes_moved",
    "median_us", "p10_us", "p90_us", "repeats", "timer", "achieved_GBps", "weight_bytes",
    "copy_us", "copy_GBps", "fraction_of_copy", "torch_fp16_us", "speedup_vs_torch_fp16",
    "triton_fp16_us", "speedup_vs_triton_fp16",
)


MODULES = ("qkv", "o", "gate", "up", "gate_up", "down", "lm_head")


def projections(d: ModelDims) -> list[tuple[str, int, int]]:
    """(module, N, K) of a Llama-family decoder's linears; y = x @ W.T with W N x K."""
    h, f = d.hidden, d.ffn
    return [("qkv", h + 2 * (d.kv_hidden or h), h), ("o", h, h), ("gate", f, h), ("up", f, h),
            ("gate_up", 2 * f, h),
            ("down", h, f), ("lm_head", d.vocab, h)]


def random_weight(fmt: Format, n: int, k: int, device: torch.device) -> Any:
    """A weight container of `fmt` holding random bits (imports the kernels lazily, see main)."""
    from mpsim.kernels.gemm import AnyPrecWeight, Fp16Weight, GroupWeight

    ints = lambda *shape: torch.randint(-(2**31), 2**31, shape, dtype=torch.int32,  # noqa: E731
                                        device=device)
    if fmt.w_format == "fp16":
        return Fp16Weight((torch.randn(n, k, device=device) * 0.02).half())
    if fmt.group_size is not None:
        groups = k // fmt.group_size
        scales = (torch.rand(n, groups, device=device) * 0.01 + 1e-3).half()
        zeros = torch.randint(0, 1 << fmt.bits, (n, groups), device=device).half()
        return GroupWeight(ints(n, k * fmt.bits // 32), scales, zeros, fmt.bits, fmt.group_size, k)
    luts = {b: (torch.randn(n, 1 << b, device=device) * 0.02).half()
            for b in range(2, ANYPREC_PARENT + 1)}
    return AnyPrecWeight(ints(ANYPREC_PARENT, n, k // 32), luts, fmt.bits, k)


def table_row(shape: dict[str, Any], fmt: Format, impl: str, kernel: str, config: str,
              t: Timing, copy: Timing, torch_fp16: Timing | None,
              triton_fp16: Timing | None = None) -> dict[str, Any]:
    """One CSV row: the timing plus its bandwidth, against the copy ceiling, cuBLAS fp16 and mpsim's
    Triton fp16 kernel."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    cost = launch_cost({"op": "gemm", "kernel": kernel, "m": m, "n": n, "k": k, "bias": False,
                        "w_format": fmt.w_format, "w_bits": fmt.bits,
                        "group_size": fmt.group_size})
    moved = cost.bytes_read + cost.bytes_written
    wbytes = weight_bytes(n, k, fmt.w_format, fmt.bits, fmt.group_size)
    return dict(shape, impl=impl, format=fmt.label, w_format=fmt.w_format, w_bits=fmt.bits,
                group_size=fmt.group_size, kernel=kernel, config=config, bytes_moved=moved,
                median_us=t.median_us, p10_us=t.p10_us, p90_us=t.p90_us, repeats=t.repeats,
                timer=t.timer, achieved_GBps=moved / t.median_us / 1e3, weight_bytes=wbytes,
                copy_us=copy.median_us, copy_GBps=2 * wbytes / copy.median_us / 1e3,
                fraction_of_copy=copy.median_us / t.median_us,
                torch_fp16_us=None if torch_fp16 is None else torch_fp16.median_us,
                speedup_vs_torch_fp16=None if torch_fp16 is None
                else torch_fp16.median_us / t.median_us,
                triton_fp16_us=None if triton_fp16 is None else triton_fp16.median_us,
                speedup_vs_triton_fp16=None if triton_fp16 is None
                else triton_fp16.median_us / t.median_us)


def twin_configs(cfg: Any) -> list[tuple[str, Any]]:
    """The launcher's config less each key that changes how its K loop loads, each timed beside it
    (the gain measured, not assumed; each twin is the loop the 2026-12-04 H200 captures ran):
    a one-row GEMV without loop_stages (impl triton-plain-loop, docs/kernels.md#pipelined-k-loops;
    the interpreter's configs run the plain loop already: there the row is a smoke test), a group
    config without sz_words (triton-2byte-scales) and an any-precision one without lut_words
    (triton-fp16-lut: docs/kernels.md#staged-scales)."""
    from mpsim.kernels.launch_config import LOOP_STAGES_KEY, LUT_WORDS_KEY, SZ_WORDS_KEY

    def without(drop: str) -> Any:
        return dataclasses.replace(cfg, extra=tuple((k, v) for k, v in cfg.extra if k != drop))

    out = []
    if cfg.block_m == 1 and cfg.kernel.startswith("gemv"):
        out.append(("triton-plain-loop", without(LOOP_STAGES_KEY)))
    keys = {k for k, _ in cfg.extra}
    out += [(impl, without(key)) for key, impl in ((SZ_WORDS_KEY, "triton-2byte-scales"),
                                                    (LUT_WORDS_KEY, "triton-fp16-lut")) if key in keys]
    return out


def bench_projection(timer: Timer, table: CsvTable, shape: dict[str, Any],
                     device: torch.device) -> None:
    """torch fp16 first (the baseline of every row), then each format with its copy ceiling."""
    from mpsim.kernels import runtime
    from mpsim.kernels.gemm import linear
    from mpsim.kernels.gemm_group import gemm_group
    from mpsim.kernels.gemv_group_asm import asm_config, takes_asm
    from mpsim.kernels.launch_config import gemm_config

    m, n, k = shape["m"], shape["n"], shape["k"]
    x = torch.randn(m, k, device=device).half()
    copies: dict[int, Timing] = {}

    def copy_time(fmt: Format) -> Timing:
        nbytes = weight_bytes(n, k, fmt.w_format, fmt.bits, fmt.group_size)
        if nbytes not in copies:
            copies[nbytes] = timer.time(copy_fn(nbytes, device))
        return copies[nbytes]

    w16 = random_weight(FORMATS[0], n, k, device).weight
    t_torch = timer.time(lambda: torch.nn.functional.linear(x, w16))
    table.write(table_row(shape, FORMATS[0], "torch", "torch.nn.functional.linear", "",
                          t_torch, copy_time(FORMATS[0]), t_torch))
    t_fp16: Timing | None = None
    for fmt in FORMATS:
        weight = random_weight(fmt, n, k, device)
        cfg = gemm_config(m, n, k, fmt.w_format, fmt.bits, fmt.group_size,
                          on_gpu=runtime.on_gpu())
        t = timer.time(lambda w=weight: linear(x, w))
        t_fp16 = t_fp16 or t  # FORMATS[0] is fp16
        runs = [("triton", cfg, t)]
        for impl, twin in twin_configs(cfg):
            runs.append((impl, twin, timer.time(lambda w=weight, c=twin: linear(x, w, config=c))))
        if runtime.on_gpu() and fmt.group_size and takes_asm(cfg, fmt.bits, fmt.group_size):
            fast = asm_config(cfg, fmt.bits, fmt.group_size)
            runs.append(("triton-asm", fast, timer.time(lambda w=weight, c=fast: gemm_group(
                x, w.qweight, w.scales, w.zeros, bits=w.bits, group_size=w.group_size,
                config=c))))
        for impl, c, tc in runs:
            row = table_row(shape, fmt, impl, c.kernel, json.dumps(c.config_dict()), tc,
                            copy_time(fmt), t_torch, t_fp16)
            table.write(row)
            print(f"{shape['model']:>16} {shape['module']:>7} M={m:<3} {fmt.label:>9} {impl:>10} "
                  f"{tc.median_us:9.1f} us {row['achieved_GBps']:8.1f} GB/s "
                  f"x{row['speedup_vs_triton_fp16']:.2f} vs fp16 "
                  f"x{row['speedup_vs_torch_fp16']:.2f} vs torch", flush=True)
        del weight


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", type=Path, default=Path("out/bench_kernels.csv"))
    p.add_argument("--models", nargs="+", default=["vicuna-7b", "llama-3-8b", "mobilellama-1.4b"],
                   choices=sorted(MODELS))
    p.add_argument("--modules", nargs="+", default=list(MODULES), choices=MODULES)
    p.add_argument("--rows", nargs="+", type=int, default=[1, 4, 16], help="M values")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: run the table logic on CPU with the Triton interpreter, tiny model")
    p.add_argument("--no-attention", action="store_true", help="skip the attention hook")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        # Before any mpsim.kernels import: Triton picks interpreter vs compiler at @triton.jit time.
        os.environ["TRITON_INTERPRET"] = "1"
        args.models, args.repeats, args.warmup = ["tiny"], min(args.repeats, 2), min(args.warmup, 1)
    elif not torch.cuda.is_available():
        print("bench_kernels: no CUDA device found; this benchmark needs an NVIDIA GPU. "
              "Use --dry-run to check its table logic on CPU.", file=sys.stderr)
        return 2
    device = torch.device("cpu") if args.dry_run else torch.device("cuda")
    timer = Timer(device, args.repeats, args.warmup)
    env = environment(device)
    table = CsvTable(args.out, COLUMNS)
    try:
        for model in args.models:
            for module, n, k in projections(MODELS[model]):
                for m in args.rows if module in args.modules else ():
                    shape = dict(env, model=model, module=module, m=m, n=n, k=k)
                    bench_projection(timer, table, shape, device)
    finally:
        table.close()
    print(f"wrote {table.rows} rows to {args.out}")
    if not args.no_attention:
        bench_attention(timer, args.out.parent, env, args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
