"""`mpsim op gemm|attention ... --hw H`: simulate one launch from its shapes and print time and bound.

The launch gets the config kernels/launch_config.py would choose for it, as in a synthesized trace.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pandas as pd

from mpsim.commands.common import add_hw_arg, hardware
from mpsim.sim.engine import simulate_launch
from mpsim.sim.op_rows import attention_row, gemm_row
from mpsim.sim.result import LaunchOutcome
from mpsim.sim.roofline import roofline


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
    add_hw_arg(g)
    g.set_defaults(func=_gemm)
    a = ops.add_parser("attention", help="decode (q-len 1) or causal prefill attention")
    for name in ("batch", "q-len", "kv-len", "heads", "kv-heads", "head-dim"):
        a.add_argument(f"--{name}", type=int, required=True)
    a.add_argument("--kv-bits", type=int, default=16, help="KV cache bits for decode: 16, 8, 4")
    a.add_argument("--kv-block", type=int, default=None, help="paged KV block (default contiguous)")
    add_hw_arg(a)
    a.set_defaults(func=_attention)


def _gemm(args: argparse.Namespace) -> int:
    row = gemm_row(args.m, args.n, args.k, args.w_format, args.bits, args.group, args.bias)
    return _report(row, args.hw)


def _attention(args: argparse.Namespace) -> int:
    row = attention_row(args.batch, args.q_len, args.kv_len, args.heads, args.kv_heads,
                        args.head_dim, args.kv_bits, args.kv_block)
    return _report(row, args.hw)


def _report(row: dict[str, Any], hw_name: str) -> int:
    hw = hardware(hw_name)
    out = simulate_launch(row, hw)
    bound = roofline(pd.DataFrame([row]), hw).iloc[0]
    print(format_launch(row, out, bound, hw.name))
    return 0


def format_launch(row: dict[str, Any], out: LaunchOutcome, bound: pd.Series, hw_name: str) -> str:
    time_s = max(out.time_s, float(bound["t_lower_s"]))
    utils = ", ".join(f"{u} {v:.0%}" for u, v in sorted(out.util.items()) if v == v)
    levels = [f"DRAM {out.bytes_dram / 1e6:.3f} MB"]
    levels += [f"L2 {out.bytes_l2 / 1e6:.3f} MB"] if out.bytes_l2 == out.bytes_l2 else []
    levels += [f"SRAM {out.bytes_sram / 1e6:.3f} MB"] if out.bytes_sram == out.bytes_sram else []
    return "\n".join([
        f"{row['kernel']} on {hw_name}  grid {row['grid']}  config {json.dumps(json.loads(row['config']))}",
        f"  time      {time_s * 1e6:10.3f} us  ({out.cycles:.0f} cycles + "
        f"{out.overhead_s * 1e6:.2f} us launch)",
        f"  bound     {out.bound}",
        f"  roofline  t_math {bound['t_math_s'] * 1e6:.3f} us, t_mem {bound['t_mem_s'] * 1e6:.3f} us, "
        f"t_lower {bound['t_lower_s'] * 1e6:.3f} us ({time_s / bound['t_lower_s']:.2f}x)",
        f"  bytes     {', '.join(levels)}; analytic {row['bytes_read'] + row['bytes_written']:,} B, "
        f"{row['flops']:,} FLOP",
        f"  util      {utils}",
    ])
