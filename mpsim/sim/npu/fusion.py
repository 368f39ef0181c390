"""The compiler's fusion pass over one step's operator sequence (when the hardware file enables it).

Norms become the prologue of the GEMM or attention that follows them (the normalized row feeds the
product); RoPE, activations and residual adds become the epilogue of the GEMM or attention before
them (or of the host an earlier epilogue joined). A fused operator gets no dispatch of its own, reads
its inputs from the host's SRAM and runs on the vector unit inside the host's stream. Anything else
(embedding gather, KV-cache writes, sampling, an operator with no host beside it) runs on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpsim.sim.npu.kernel_model import FUSABLE, HOSTS

ALONE = -1


def fuse(ops: Sequence[str], enabled: bool) -> list[int]:
    """For every operator, the index of the operator it runs inside (itself, when not fused)."""
    owner = list(range(len(ops)))
    if not enabled:
        return owner
    for i, op in enumerate(ops):
        if op not in FUSABLE:
            continue
        if op == "norm" and i + 1 < len(ops) and ops[i + 1] in HOSTS:
            owner[i] = i + 1
        elif i > 0 and ops[owner[i - 1]] in HOSTS and op != "norm":
            owner[i] = owner[i - 1]
    return owner
