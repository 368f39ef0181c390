"""`mpsim op gemm|attention ... --hw H`: price one launch from its shapes and print time and bound.

The launch row comes from mpsim.launch_plan (the config kernels/launch_config.py would choose, as in a
synthesized trace; or, with `--config best`, the candidate the simulator predicts fastest on H,
mpsim.sim.best_config; `--kernel` prices another library's kernel, mpsim/library/ and mpsim/sim/gpu/library/)
and is priced by mpsim.sim.launch.price_launch: the numbers `mpsim.sim.simulate` gives the one-row
trace, in plain Python, so that the command starts without numpy or pandas (on an NPU, whose model
prices whole steps, through `simulate`). It prints the time, the bound, the roofline terms, bytes,
utilisation and the time's named parts, one line each (microseconds and share of the time).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import Any

from mpsim.commands.common import (
    PERF_MODEL_NAMES,
    add_engine_arg,
    add_hw_arg,
    add_method_arg,
    hardware,
)
from mpsim.commands.op_comm import register_collective
from mpsim.launch_plan import attention_row, gemm_row
from mpsim.library import ATTENTION_LIBRARIES, GEMM_KERNELS
from mpsim.library.rows import with_config
from mpsim.traces.schema import DEFAULT_ENGINE

# --help text of the shape arguments
DIM_HELP = {"m": "activation rows (tokens)", "n": "weight rows (output features)",
            "k": "the reduction dimension (input features)", "batch": "sequences",
            "q-len": "query tokens per sequence (1: decode, more: causal prefill)",
            "kv-len": "key/value tokens per sequence, these queries' included (>= --q-len)",
            "heads": "query heads", "kv-heads": "key/value heads (fewer than --heads: grouped-query)",
            "head-dim": "dimension of one head"}


def register(sub: Any) -> None:
    p = sub.add_parser("op", help="simulate one launch (gemm or attention) from its shapes")
    ops = p.add_subparsers(dest="op_kind", required=True, metavar="{gemm,attention,collective}")
    g = ops.add_parser("gemm", help="y = x @ W.T with an M x K activation and an N x K weight")
    for dim in ("m", "n", "k"):
        g.add_argument(f"--{dim}", type=int, required=True, help=DIM_HELP[dim])
    g.add_argument("--w-format", default="fp16",
                   help="fp16, group (int{bits}-group), anyprec, or a trace spelling (default fp16)")
    g.add_argument("--bits", type=int, default=16, help="weight bits (group: 8,4,3,2; anyprec: 2..8)")
    g.add_argument("--group", type=int, default=None, help="group size for group formats (default 128)")
    g.add_argument("--bias", action="store_true", help="the GEMM also adds a bias vector")
    g.add_argument("--kernel", default=None, choices=GEMM_KERNELS,
                   help="price another library's kernel instead of mpsim's Triton kernel")
    g.add_argument("--config", default="heuristic", choices=("heuristic", "best"),
                   help="the launch config: the launcher's heuristic (default) or the candidate the "
                        "simulator predicts fastest on --hw (model-guided autotune; prints its cost)")
    _common(g, _gemm)
    a = ops.add_parser("attention", help="decode (q-len 1) or causal prefill attention")
    for name in ("batch", "q-len", "kv-len", "heads", "kv-heads", "head-dim"):
        a.add_argument(f"--{name}", type=int, required=True, help=DIM_HELP[name])
    a.add_argument("--kv-bits", type=int, default=16, help="KV cache bits for decode: 16, 8, 4")
    a.add_argument("--kv-block", type=int, default=None, help="paged KV block (default contiguous)")
    a.add_argument("--kernel", default=None, choices=ATTENTION_LIBRARIES,
                   help="price another library's op instead of mpsim's kernel: fa3 (vLLM's "
                        "FlashAttention-3), trtllm (TensorRT-LLM's XQA/MMHA decode or context FMHA, "
                        "RoPE and KV append inside), sglang (SGLang's FA3 backend), sglang_triton "
                        "(SGLang's Triton backend on Hopper), vllm_triton (vLLM's Triton backend, "
                        "any GPU)")
    a.add_argument("--kv-append", action="store_true", help="fa3: the op also appends the new K/V")
    a.add_argument("--window", type=int, default=0,
                   help="sliding window: keys each query sees, its own included (default 0: all); "
                        "one shorter than --kv-len is modelled for FA3, TensorRT-LLM's op on "
                        "Hopper and Blackwell, the trtllm-gen kernels and SGLang's and vLLM's Triton "
                        "backends (library.WINDOWED_LIBRARIES)")
    _common(a, _attention)
    register_collective(ops, _common, _report)


def _common(p: argparse.ArgumentParser, func: Any) -> None:
    add_hw_arg(p)
    add_engine_arg(p, "the op (the kernel its file names for this op, format and M on --hw)")
    add_method_arg(p)
    p.add_argument("--perf-model", default="sim", choices=PERF_MODEL_NAMES,
                   help="performance model (default sim)")
    p.set_defaults(func=func)


def _gemm(args: argparse.Namespace) -> int:
    _check_engine(args)
    if args.config == "best":
        from mpsim.sim.best_config import best_gemm_row  # the simulator and pandas: only when tuning

        hw = hardware(args.hw)
        best = best_gemm_row(args.m, args.n, args.k, args.w_format, args.bits, args.group,
                             args.bias, hw=hw, kernel=args.kernel)
        print(f"best config of {best.candidates} candidates on {hw.name}: {best.config.name()} "
              f"(search cost: {best.simulated} simulated launches, {best.wall_s:.2f} s)")
        return _report(best.row, args)
    hw = hardware(args.hw)
    row = gemm_row(args.m, args.n, args.k, args.w_format, args.bits, args.group, args.bias,
                   kernel=args.kernel, config=_fixed_config(args, hw), sms=hw.compute_units)
    return _report(_as_engine(row, hw, args), args)


def _fixed_config(args: argparse.Namespace, hw: Any) -> Any:
    """The --kernel library's own choice for --hw's architecture (cuBLAS's tile sets per generation,
    vLLM's sm89 / sm90 fp8 dispatch, ...: best_config.fixed_config); None (the kernel's own
    default) where it does not depend on the architecture and off a GPU."""
    if args.kernel is None:
        return None
    from mpsim.errors import MpsimInputError
    from mpsim.sim.best_config import fixed_config  # the GPU model: only for a library kernel

    try:
        return fixed_config(args.kernel, args.m, args.n, args.k, args.group, hw, args.bits)
    except ValueError as exc:  # an architecture the kernel does not run on
        raise MpsimInputError(f"op gemm --kernel {args.kernel} --hw {hw.name}: {exc}") from None


def _attention(args: argparse.Namespace) -> int:
    _check_engine(args)
    hw = hardware(args.hw)
    mine = args.engine == DEFAULT_ENGINE  # else --engine's room takes the window (its own rule)
    row = attention_row(args.batch, args.q_len, args.kv_len, args.heads, args.kv_heads,
                        args.head_dim, args.kv_bits, args.kv_block, kernel=args.kernel,
                        kv_append=args.kv_append, sms=hw.compute_units,
                        window=args.window if mine else 0)
    if args.window and not mine:
        row = with_config(row, "window", args.window)
    return _report(_as_engine(row, hw, args), args)


def _check_engine(args: argparse.Namespace) -> None:
    """--engine picks the kernel from its file: not with --kernel (which names one) nor --config
    best (which tunes mpsim's own configs)."""
    from mpsim.engines import get_engine
    from mpsim.errors import MpsimInputError

    get_engine(args.engine)  # an unknown name: the error naming the known ones
    if args.engine == DEFAULT_ENGINE:
        return
    if args.kernel is not None:
        raise MpsimInputError(f"--kernel {args.kernel} and --engine {args.engine} both pick the kernel; "
                              "give one")
    if getattr(args, "config", "heuristic") == "best":
        raise MpsimInputError(f"--config best tunes mpsim's own kernels; engine {args.engine!r} "
                              "launches its libraries' own configs")


def _as_engine(row: dict[str, Any], hw: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The launch as --engine's kernel for its op, format and M on --hw (the row unchanged for mpsim)."""
    if args.engine == DEFAULT_ENGINE:
        return row
    from mpsim.engines import EngineChoice, architecture, get_engine
    from mpsim.engines.rows import Target, as_engine, choose, op_of
    from mpsim.launch_plan import costed

    engine, arch = get_engine(args.engine), architecture(hw)
    op, fmt, m = op_of(row)
    n, k = (int(row["n"]), int(row["k"])) if op == "gemm" else (None, None)
    method = getattr(args, "quant_method", None)
    picked = choose(engine, op, fmt, m, arch, n, k, method)
    stands = f" (stands in for {picked.stands_in_for})" if picked.stands_in_for else ""
    d = int(row.get("head_dim") or 0)
    heads = (int(row.get("num_q_heads") or 0), int(row.get("num_kv_heads") or 0), d, d)
    built = as_engine(row, Target(engine, arch, heads, EngineChoice.on(args.engine, hw).sms
                                  or hw.compute_units, method=method))
    assert built is not None, "op prices GEMMs and attention, which no engine fuses away"
    via = f" (its dispatch: {built['kernel']})" if built["kernel"] != picked.kernel else ""
    print(f"engine {engine.name} on {arch}: {op} {fmt} at M={m} runs {picked.kernel}{via}{stands}")
    return costed(built)


def _report(row: dict[str, Any], args: argparse.Namespace) -> int:
    hw = hardware(args.hw)
    start = time.perf_counter()
    if hw.kind == "npu" and args.perf_model == "sim":
        # the NPU step model prices whole steps (numpy, pandas load here): one launch is a step of one
        from mpsim.sim import simulate
        from mpsim.sim.result import LAUNCH_COLUMNS
        from mpsim.traces.trace import rows_to_frame

        launches = simulate(rows_to_frame([row]), hw, "sim", cache_dir=None).launches
        out = {c: launches[c].iloc[0] for c in LAUNCH_COLUMNS}
    else:
        # SimPy and the GPU model load here, not when the CLI builds its parser (no pandas at all)
        from mpsim.sim.launch import price_launch

        out = price_launch(row, hw, args.perf_model)
    print(format_launch(row, out, hw.name))
    print(f"  priced in {time.perf_counter() - start:.2f} s")
    return 0


def format_launch(row: Mapping[str, Any], out: Mapping[str, Any], hw_name: str) -> str:
    """What one priced launch costs: time, bound, roofline terms, bytes per level, utilisation."""
    utils = ", ".join(f"{c[5:]} {v:.0%}" for c, v in sorted(out.items())
                      if str(c).startswith("util_") and v == v)
    levels = [f"DRAM {out['bytes_dram'] / 1e6:.3f} MB"]
    levels += [f"L2 {out['bytes_l2'] / 1e6:.3f} MB"] if out["bytes_l2"] == out["bytes_l2"] else []
    levels += [f"SRAM {out['bytes_sram'] / 1e6:.3f} MB"] if out["bytes_sram"] == out["bytes_sram"] else []
    time_s, lower = float(out["time_s"]), float(out["t_lower_s"])
    return "\n".join([
        f"{row['kernel']} on {hw_name}  grid {row['grid']}  config {json.dumps(json.loads(row['config']))}",
        f"  time      {time_s * 1e6:10.3f} us  ({out['cycles']:.0f} cycles + "
        f"{out['overhead_s'] * 1e6:.2f} us launch)",
        f"  bound     {out['bound']}",
        f"  roofline  t_math {out['t_math_s'] * 1e6:.3f} us, t_mem {out['t_mem_s'] * 1e6:.3f} us, "
        f"t_lower {lower * 1e6:.3f} us ({time_s / lower:.2f}x)",
        f"  bytes     {', '.join(levels)}; analytic {row['bytes_read'] + row['bytes_written']:,} B, "
        f"{row['flops']:,} FLOP",
        f"  util      {utils}",
        "  parts     what the time is made of (docs/simulator.md#time-parts)",
        *format_parts(out),
    ])


# The named parts of a launch's time (mpsim.sim.result.PARTS), as `mpsim op` explains them.
PART_TEXT = {
    "memory": "moving data: HBM, L2 ports (NPU: DMA stream, SRAM)",
    "math": "matrix units: tensor cores (NPU: MAC array)",
    "issue": "CUDA-core pipes: dequantization, softmax, FMAs (NPU: decoder, vector unit)",
    "comm": "collectives on the node's links (NVLink, PCIe): a parallel plan's all-reduce, send/recv",
    "latency": "exposed latency and stalls: round trips, fill and drain, idle SMs",
    "fixed": "kernel floor, per-CTA setup, per-launch fixed work (a combine, an op's scope)",
    "launch": "outside the kernel: the protocol's per-launch cost (NPU: dispatch wait)",
}


def format_parts(out: Mapping[str, Any]) -> list[str]:
    """One line per named part of `out`'s time: microseconds, share of the time, what it is."""
    time_s = float(out["time_s"])
    return [f"    {name:8s} {float(out[f'part_{name}_s']) * 1e6:10.3f} us "
            f"{float(out[f'part_{name}_s']) / time_s if time_s > 0 else 0.0:6.1%}  {text}"
            for name, text in PART_TEXT.items()]
