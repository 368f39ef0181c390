"""THE dispatch table of the simulator: kernel name -> work builder, one room per kernel library.

Each room (mpsim/sim/gpu/library/<name>.py, named as its synthesis-floor room mpsim/library/<name>.py,
which holds the kernel names, configs and row builders) declares `WORK`, its kernels' builders; a
room's docstring says what its rows mean. `work_for(kernel)` finds a kernel's builder (an unknown
kernel is an error naming the known ones); `launch_kernels(row)` says how many GPU kernels a row
stands for.

Every kernel's time is `kernel_s` (its duration on the GPU as CUPTI would time it, the kernel floor
included) plus `overhead_s`, the measurement protocol's cost for `launch_kernels(row)` kernels
(mpsim/sim/protocols.py; `graph` by default). A row with `kv_append` stands for two kernels, as do
TensorRT-LLM's HMMA XQA and context FMHA rows and its Blackwell attention op (the
QKV-preprocessing kernel first).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mpsim.library import SCALED_GEMM_KERNELS
from mpsim.library.cublas import CUBLAS_GEMM
from mpsim.library.fa2 import FA2_DECODE, FA2_PREFILL
from mpsim.library.fa3 import FA3_DECODE, FA3_PREFILL
from mpsim.library.flashinfer_attention import FI_DECODE, FI_PREFILL
from mpsim.library.flashinfer_trtllm import TG_DECODE, TG_PREFILL
from mpsim.library.gemlite import KERNELS as GEMLITE_KERNELS
from mpsim.library.scaled_gemm import QUANT_KERNELS
from mpsim.library.sglang import SGLANG_FA3_DECODE, SGLANG_FA3_PREFILL
from mpsim.library.sglang_triton import SGLANG_TRITON_DECODE, SGLANG_TRITON_PREFILL
from mpsim.library.trtllm_attention import TRTLLM_FMHA, TRTLLM_XQA
from mpsim.library.trtllm_sm89 import TRTLLM_SM89_FMHA
from mpsim.library.trtllm_sm100 import KERNELS as TRTLLM_SM100_KERNELS
from mpsim.library.trtllm_sm100 import TRTLLM_TG_DECODE
from mpsim.library.vllm_triton import VLLM_TRITON_DECODE, VLLM_TRITON_PREFILL
from mpsim.sim.gpu.library import (
    act_quant,
    cublas,
    cutlass_fp8,
    deepgemm,
    fa2,
    fa3,
    flashinfer_attention,
    flashinfer_gemm,
    flashinfer_trtllm,
    gemlite,
    machete,
    marlin,
    mpsim,
    sglang,
    sglang_triton,
    torch,
    triton_fp8,
    trtllm,
    trtllm_fp8,
    trtllm_sm89,
    trtllm_sm100,
    turbomind,
    vllm,
    vllm_triton,
)
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import LaunchWork

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams

    WorkBuilder = Callable[[Mapping[str, Any], Mapping[str, int], list[int], GpuRates, SimParams,
                             float], LaunchWork]

ROOMS: dict[str, Mapping[str, WorkBuilder]] = {
    "mpsim": mpsim.WORK, "cublas": cublas.WORK, "trtllm": trtllm.WORK, "fa3": fa3.WORK,
    "vllm": vllm.WORK, "torch": torch.WORK, "marlin": marlin.WORK, "machete": machete.WORK,
    "turbomind": turbomind.WORK, "sglang": sglang.WORK, "cutlass_fp8": cutlass_fp8.WORK,
    "deepgemm": deepgemm.WORK, "flashinfer_gemm": flashinfer_gemm.WORK, "trtllm_fp8": trtllm_fp8.WORK,
    "act_quant": act_quant.WORK, "fa2": fa2.WORK, "flashinfer_attention": flashinfer_attention.WORK,
    "flashinfer_trtllm": flashinfer_trtllm.WORK, "gemlite": gemlite.WORK,
    "trtllm_sm100": trtllm_sm100.WORK, "triton_fp8": triton_fp8.WORK,
    "trtllm_sm89": trtllm_sm89.WORK, "sglang_triton": sglang_triton.WORK,
    "vllm_triton": vllm_triton.WORK}


def table(rooms: Mapping[str, Mapping[str, WorkBuilder]]) -> dict[str, WorkBuilder]:
    """The rooms' WORK mappings as one table; a kernel in two rooms is an error naming both."""
    out: dict[str, WorkBuilder] = {}
    owner: dict[str, str] = {}
    for room, work in rooms.items():
        for kernel, builder in work.items():
            if kernel in out:
                raise RuntimeError(f"kernel {kernel!r} has two work models: rooms {owner[kernel]} and {room}")
            out[kernel], owner[kernel] = builder, room
    return out


WORK: dict[str, WorkBuilder] = table(ROOMS)
EXTERNAL: dict[str, WorkBuilder] = {k: b for k, b in WORK.items() if k not in mpsim.WORK}


def work_for(kernel: str) -> WorkBuilder:
    """The work builder of `kernel`; an unknown kernel is an error naming the known ones."""
    if kernel not in WORK:
        raise ValueError(f"no work model for kernel {kernel!r}; known kernels: {sorted(WORK)}")
    return WORK[kernel]


def _config(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A row's config: the trace's JSON text, or the dict of a row not costed yet."""
    cfg = row["config"]
    return cfg if isinstance(cfg, Mapping) else json.loads(str(cfg))


def launch_kernels(row: Mapping[str, Any]) -> int:
    """How many GPU kernels one launch row stands for (what a per-kernel protocol cost multiplies)."""
    kernel = str(row["kernel"])
    if kernel in (FA3_DECODE, FA3_PREFILL, SGLANG_FA3_DECODE, SGLANG_FA3_PREFILL):
        cfg = _config(row)
        q_cast = kernel == FA3_PREFILL and bool(cfg.get("fp8", 0))
        return 1 + int(bool(cfg.get("kv_append", 0))) + int(q_cast)  # + an fp8 prefill's query cast
    if kernel in (FA2_DECODE, FA2_PREFILL, FI_DECODE, FI_PREFILL, TG_DECODE, TG_PREFILL):
        # + vLLM's (or TensorRT-LLM's) KV append; + FA2's combine / FlashInfer's merge kernel when
        # split (trtllm-gen merges in the kernel)
        cfg = _config(row)
        merge = kernel not in (TG_DECODE, TG_PREFILL) and int(cfg.get("split_k", 1)) > 1
        casts = 3 * int(cfg.get("qkv_cast", 0))  # TensorRT-LLM's FlashInfer op: q, k, v to e4m3
        return 1 + int(bool(cfg.get("kv_append", 0))) + int(merge) + casts
    if kernel in (SGLANG_TRITON_DECODE, SGLANG_TRITON_PREFILL):  # SGLang's store (+ an fp8 cache's
        # two casts of the new K and V; + prefill's clones of k and v), then stage 1 and stage 2 /
        # the extend kernel
        casts = 2 * int(_config(row).get("kv_cast", 0))
        return 3 + casts if kernel == SGLANG_TRITON_DECODE else 4 + casts
    if kernel in (VLLM_TRITON_DECODE, VLLM_TRITON_PREFILL):  # + vLLM's KV write; + the 3D form's
        # reduce_segments
        cfg = _config(row)
        return 1 + int(bool(cfg.get("kv_append", 0))) + int(int(cfg.get("segments", 1)) > 1)
    if kernel == TRTLLM_XQA:   # HMMA: the QKV-preprocessing kernel runs first; GMMA fuses it
        return 2 - int(_config(row).get("gmma", 0))
    if kernel == TRTLLM_TG_DECODE:  # Blackwell's generation: build decoder info, QKV prep, trtllm-gen
        return 3
    if kernel in (TRTLLM_FMHA, TRTLLM_SM89_FMHA) or kernel in TRTLLM_SM100_KERNELS:  # QKV prep, FMHA
        return 2
    if kernel in GEMLITE_KERNELS:  # + the output's zero fill before atomic adds
        return 1 + int(_config(row).get("zero_init", 0))
    if kernel == CUBLAS_GEMM:  # Hopper split-K: + splitKreduce_kernel
        cfg = _config(row)
        return 1 + int(int(cfg.get("sm", 90)) == 90 and int(cfg.get("split_k", 1)) > 1
                       and not int(cfg.get("stream_k", 0)))
    if kernel in SCALED_GEMM_KERNELS:  # the measured call's activation quantization kernels first
        return 1 + QUANT_KERNELS[int(_config(row).get("quant", 0))]
    return 1
