"""Collective kernels of a parallel plan (mpsim/parallel.py): who runs each collective, as trace rows.

Not a kernel library of the dispatch table (no SimPy work model): the simulator prices collective
rows with the cost model mpsim/sim/collectives.py on the hardware file's node (hw_models/nodes).
An engine file names its all-reduce library in its `allreduce` op (mpsim/data/engines/*.yaml).

Kernel names: `nccl_<op>` (NCCL through torch.distributed), `vllm_custom_allreduce` (vLLM's
csrc/custom_all_reduce.cuh one-/two-shot kernels, falling back to NCCL or symmetric memory by its
own size limits) and `trtllm_custom_allreduce` (TensorRT-LLM's allreduce kernels, one-shot up to
128 token rows, two-shot above, or NCCL, as its strategy picks).
"""

from __future__ import annotations

from typing import Any

from mpsim.traces.schema import COLLECTIVE_OPS, COMM_LIBRARIES

NCCL_KERNELS = {op: f"nccl_{op}" for op in COLLECTIVE_OPS}
ALLREDUCE_KERNELS = {"nccl": NCCL_KERNELS["allreduce"], "vllm_custom": "vllm_custom_allreduce",
                     "trtllm_custom": "trtllm_custom_allreduce"}
KERNELS = (*NCCL_KERNELS.values(), *(k for k in ALLREDUCE_KERNELS.values() if k not in NCCL_KERNELS.values()))
LIBRARY_OF_KERNEL = {**{k: "nccl" for k in NCCL_KERNELS.values()},
                     **{k: lib for lib, k in ALLREDUCE_KERNELS.items()}}
ACT_BYTES = 2  # fp16/bf16 activations and logits: what every collective of a pass moves
assert set(LIBRARY_OF_KERNEL.values()) == set(COMM_LIBRARIES)


def collective_row(op: str, kernel: str, m: int, n: int, group: int, module: str, layer: int,
                   stage: int) -> dict[str, Any]:
    """One collective over an m x n fp16 tensor on a group of `group` ranks (send/recv: one pair,
    `group` the tensor-parallel size of the stages it links). Message bytes as nccl-tests counts
    them: the all-reduce's buffer, the all-gather's gathered output, the reduce-scatter's input,
    the tensor sent."""
    if op not in COLLECTIVE_OPS or LIBRARY_OF_KERNEL.get(kernel) is None:
        raise ValueError(f"collective {op!r} by {kernel!r}: expected an op of {COLLECTIVE_OPS} and a "
                         f"kernel of {KERNELS}")
    if op != "allreduce" and kernel != NCCL_KERNELS[op]:
        raise ValueError(f"{op} runs on NCCL ({NCCL_KERNELS[op]}), not {kernel}")
    return {"op": op, "kernel": kernel, "module": module, "layer": layer, "m": m, "n": n,
            "tp": group, "stage": stage, "msg_bytes": m * n * ACT_BYTES,
            "comm_library": LIBRARY_OF_KERNEL[kernel], "a_dtype": "fp16", "out_dtype": "fp16",
            "grid": [1], "config": {}}
