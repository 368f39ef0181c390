"""`mpsim op gemm|attention ... --hw H`: price one launch from its shapes and print time and bound.

The launch row comes from mpsim.launch_plan (the config kernels/launch_config.py would choose, as in a
synthesized trace) and is priced by mpsim.sim.launch.price_launch: the numbers `mpsim.sim.simulate`
gives the one-row trace, in plain Python, so that the command starts without numpy or pandas.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from mpsim.commands.common import PERF_MODEL_NAMES, add_hw_arg, hardware
from mpsim.launch_plan import attention_row, gemm_row


def register(sub: Any) -> None:
    p = sub.add_parser("op", help="simulate one launch (gemm or attention) from its shapes")
    ops = p.add_subparsers(dest="op_kind", required=True, metavar="{gemm,attention}")
    g = ops.add_parser("gemm", help="y = x @ W.T with an M x K activation and an N x K weight")
    for dim in ("m", "n", "k"):
        g.add_argument(f"--{dim}", type=int, required=True)
    g.add_argument("--w-format", default="fp16",
                   help="fp16, group (int{bits}-group), anyprec, or a trace spelling (default fp16)")
    g.add_argument("--bits", type=int, default=16, help="weight bits (group: 8,4,3,2; anyprec: 2..8)")
    g.add_argument("--group", type=int, default=None, help="group size for group formats (default 128)")
    g.add_argument("--bias", action="store_true")
    _common(g, _gemm)
    a = ops.add_parser("attention", help="decode (q-len 1) or causal prefill attention")
    for name in ("batch", "q-len", "kv-len", "heads", "kv-heads", "head-dim"):
        a.add_argument(f"--{name}", type=int, required=True)
    a.add_argument("--kv-bits", type=int, default=16, help="KV cache bits for decode: 16, 8, 4")
    a.add_argument("--kv-block", type=int, default=None, help="paged KV block (default contiguous)")
    _common(a, _attention)


def _common(p: argparse.ArgumentParser, func: Any) -> None:
    add_hw_arg(p)
    p.add_argument("--perf-model", default="sim", choices=PERF_MODEL_NAMES,
                   help="performance model (default sim)")
    p.set_defaults(func=func)


def _gemm(args: argparse.Namespace) -> int:
    row = gemm_row(args.m, args.n, args.k, args.w_format, args.bits, args.group, args.bias)
    return _report(row, args)


def _attention(args: argparse.Namespace) -> int:
    row = attention_row(args.batch, args.q_len, args.kv_len, args.heads, args.kv_heads,
                        args.head_dim, args.kv_bits, args.kv_block)
    return _report(row, args)


def _report(row: dict[str, Any], args: argparse.Namespace) -> int:
    hw = hardware(args.hw)
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
    ])
