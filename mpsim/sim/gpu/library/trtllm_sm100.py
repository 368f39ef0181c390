"""TensorRT-LLM's attention op on Blackwell (`trtllm_tg_decode`, `trtllm_tg_context`) as CTA work
(names, dispatch rule and sources: mpsim/library/trtllm_sm100.py).

A call is the op as aiconfigurator timed it: for generation first TensorRT-LLM's build-decoder-info
kernel (`decoder_info_part`: a launch of the batch's lengths, its price the launch's floor; the
Hopper op whose `xqa_scope_us` is reused here runs none for a plain decode), then its
QKV-preprocessing kernel (RoPE, the new tokens' K/V appended to the cache, Q cast to e4m3 over an
e4m3 cache), priced as the trtllm room prices it before the Hopper context FMHA
(trtllm_attention.prep_part: blocks for every query head, in rounds of resident blocks,
`trtllm.prep_round_ns` a round), then the trtllm-gen kernel, priced by the flashinfer_trtllm room's
work model (the same cubins vLLM runs on Blackwell, its `tg_*` constants), and TensorRT-LLM's own op
cost in place of vLLM's (`trtllm.xqa_scope_us` for generation, `trtllm.fmha_scope_us` for the
context). No constant is fitted on these rows: the kernel's from B200 vLLM rows, the op's and the
preprocessing's from H200 TensorRT-LLM rows (docs/validation.md "TRT-LLM attention on Blackwell";
`prep_round_ns` was kept rather than refitted with the H200 context FMHA, a choice the B200 TRT-LLM
minus vLLM pairs informed, as said there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mpsim.library.trtllm_sm100 import TRTLLM_TG_CONTEXT, TRTLLM_TG_DECODE
from mpsim.sim.gpu.library.flashinfer_trtllm import tg_decode_work, tg_prefill_work
from mpsim.sim.gpu.library.framework import one_part
from mpsim.sim.gpu.library.trtllm_attention import prep_part
from mpsim.sim.gpu.occupancy import CtaResources
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.work import Epilogue, KernelPart, KernelWork, LaunchWork, Trip

if TYPE_CHECKING:  # annotations only: params.py imports the rooms (their params)
    from mpsim.sim.params import SimParams


def _prep(row: Mapping[str, Any], q_len: int, r: GpuRates, p: SimParams) -> KernelPart:
    """The QKV preprocessing of an attention row over q_len new tokens a sequence (Q cast to e4m3
    over an e4m3 cache)."""
    bits = int(row["k_bits"])
    return prep_part(int(row["batch"]), q_len, int(row["num_q_heads"]), int(row["num_kv_heads"]),
                     int(row["head_dim"]), bits, bits == 8, r, p)


def decoder_info_part(batch: int) -> KernelPart:
    """invokeBuildDecoderInfo (TensorRT-LLM kernels/gptKernels.cu): the sequences' cumulative KV
    lengths (and the FMHA scales) for the trtllm-gen kernels, one small kernel over the batch's
    lengths (its work the launch's floor)."""
    trip = Trip(0.0, 0.0)
    work = KernelWork(trip, Epilogue(0.0), (1,), "single", 1, 1, CtaResources(8, 0.0, 0.0, 1, 32),
                      float(batch * 4), dram_write_bytes=float(batch * 8), name="trtllm build decoder info")
    return one_part(work)[0]


def tg_decode_op_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                      p: SimParams, resident: float) -> LaunchWork:
    op = replace(p, flashinfer=replace(p.flashinfer, tg_decode_scope_us=p.trtllm.xqa_scope_us))
    return [decoder_info_part(int(row["batch"])), _prep(row, 1, r, p),
            *tg_decode_work(row, cfg, grid, r, op, resident)]


def tg_context_op_work(row: Mapping[str, Any], cfg: Mapping[str, int], grid: list[int], r: GpuRates,
                       p: SimParams, resident: float) -> LaunchWork:
    op = replace(p, flashinfer=replace(p.flashinfer, tg_prefill_scope_us=p.trtllm.fmha_scope_us))
    return [_prep(row, int(row["q_len"]), r, p), *tg_prefill_work(row, cfg, grid, r, op, resident)]


WORK = {TRTLLM_TG_DECODE: tg_decode_op_work, TRTLLM_TG_CONTEXT: tg_context_op_work}
