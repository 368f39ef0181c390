"""`mpsim op collective --op allreduce --tokens M --hidden N --tp G --hw H`: price one collective of
a parallel plan (mpsim/parallel.py) on the hardware file's node, as a trace's collective row is priced
(mpsim/sim/comm.py: NCCL's algorithm and protocol by message size, or vLLM's / TensorRT-LLM's custom
all-reduce), with the roofline's plain bound beside it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from mpsim.traces.schema import COLLECTIVE_OPS, COMM_LIBRARIES


def register_collective(ops: Any, common: Any, report: Callable[[dict[str, Any], argparse.Namespace], int]
                        ) -> None:
    """The `collective` subcommand of `mpsim op`; `common` adds --hw, --engine, --perf-model and the
    handler, `report` prints a priced launch (mpsim/commands/op.py)."""
    c = ops.add_parser("collective", help="a parallel plan's collective over an M x N fp16 tensor")
    c.add_argument("--op", default="allreduce", choices=COLLECTIVE_OPS,
                   help="allreduce (after a row-parallel GEMM), allgather (logits), reducescatter, "
                        "sendrecv (between pipeline stages); default allreduce")
    c.add_argument("--tokens", type=int, required=True, help="rows of the tensor (tokens, or sequences)")
    c.add_argument("--hidden", type=int, required=True,
                   help="width of the tensor (the hidden size; allgather: the gathered width)")
    c.add_argument("--tp", type=int, required=True, help="GPUs in the group (sendrecv: any, one pair)")
    c.add_argument("--library", default=None, choices=COMM_LIBRARIES,
                   help="who runs the all-reduce (default: --engine's file, mpsim's NCCL)")
    common(c, lambda args: _collective(args, report))


def _collective(args: argparse.Namespace, report: Callable[[dict[str, Any], argparse.Namespace], int]) -> int:
    from mpsim.engines import get_engine
    from mpsim.engines.rows import allreduce_library
    from mpsim.errors import MpsimInputError
    from mpsim.library.collectives import ALLREDUCE_KERNELS, NCCL_KERNELS, collective_row
    from mpsim.library.rows import single

    if min(args.tokens, args.hidden, args.tp) < 1:
        raise MpsimInputError("op collective: --tokens, --hidden and --tp must be >= 1")
    if args.op != "sendrecv" and args.tp < 2:
        raise MpsimInputError(f"op collective: {args.op} on --tp {args.tp}: a group of 2 or more GPUs")
    library = args.library or allreduce_library(get_engine(args.engine))
    if args.op != "allreduce" and args.library not in (None, "nccl"):
        raise MpsimInputError(f"op collective: {args.op} runs on NCCL, not {args.library}")
    kernel = ALLREDUCE_KERNELS[library] if args.op == "allreduce" else NCCL_KERNELS[args.op]
    row = collective_row(args.op, kernel, args.tokens, args.hidden, args.tp, "collective", 0, 0)
    group = "between two GPUs" if args.op == "sendrecv" else f"on {args.tp} GPUs"
    print(f"{args.op} of {row['msg_bytes']:,} bytes {group} by {row['comm_library']}")
    return report(single(row), args)
