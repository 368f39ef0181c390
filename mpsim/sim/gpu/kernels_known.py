"""The kernels the GPU model knows how to price, by the `kernel` column of a launch row.

mpsim's own Triton kernels (kernels/: `gemv_*_kernel`, `gemm_*_kernel`, `attention_decode_kernel`,
`attention_prefill_kernel`, `kv_quant_kernel` and the row-wise kernels) are priced from their own
launch configs and, for the GEMM/GEMV family, their own SASS instruction mix. Rows measured on other
software name one of the kernels below (names in kernels/launch_config.py; rows built by
mpsim.launch_plan.gemm_row / attention_row / framework_op_row, configs from launch_config):

- `cublas_gemm`: cuBLAS on Hopper (cublas_work.py): data-parallel waves or persistent stream-K.
  Row: op gemm, w_format fp16 (bf16 is read as fp16); config from `cublas_candidates` /
  `cublas_heuristic`: block_m = token tile, block_n = weight tile, block_k 64, `stream_k` 0/1;
  grid = the tiles, or the persistent CTAs.
- `trtllm_wo_gemv`: TensorRT-LLM's weight-only batched GEMV (trtllm_work.py). Row: op gemm, m 1..4,
  w_format int4-group / int8-group with group_size = k (per-channel scales); config
  `trtllm_wo_config`.
- `fa3_decode`: vLLM's FlashAttention-3 decode op (fa3_work.py). Row: op attention, q_len 1,
  k_bits = v_bits 16 or 8 (8 is FA3's fp8 e4m3 cache: one byte an element, a per-tensor scale);
  config `fa3_decode_config`: split_k = FA3's splits, `kv_append` 0/1 (the op also appended the
  new token's K/V: a second kernel), `l2_warm` 0/1 (replayed back to back: a KV cache that fits the
  usable L2 is read from it).
- `fa3_prefill`: vLLM's FA3 causal prefill op (fa3_work.py). Row: op attention, q_len = kv_len > 1,
  16-bit K/V, causal; config `fa3_prefill_config` (`kv_append`).
- `vllm_rms_norm` (op norm, m tokens, n hidden), `vllm_silu_and_mul` (op act, n = output width,
  k = 2n), `vllm_rotary_embedding` (op rope, n = (heads + kv_heads) x head_dim, k = head_dim, with
  num_q_heads, num_kv_heads, head_dim), `torch_add` (op other, n hidden; config `l2_warm` 1: the
  second input is the previous kernel's output): vLLM's one-block-per-token kernels and PyTorch's
  vectorized add (framework_work.py).
- `trtllm_xqa_decode`, `trtllm_mmha_decode`: TensorRT-LLM's generation attention op (RoPE, KV append
  and attention; trtllm_attention_work.py). Row: op attention, q_len 1, k_bits 16 or 8 (e4m3);
  config `xqa_config` (split_k = XQA's multi-block count, `gmma` 1 for the Hopper fp8-cache kernel)
  or `mmha_config` (split_k = MMHA's KV tiles), `l2_warm` as FA3's; which one a call runs:
  `trtllm_decode_kernel` (kernels/engine_attention.py).
- `trtllm_context_fmha`: TensorRT-LLM's context attention op (preprocessing + FMHA). Row: op
  attention, q_len = kv_len > 1; config `fmha_config` (`fp8` 1 for the FP8 FMHA, `kv_fp8`).
- `sglang_fa3_decode`, `sglang_fa3_prefill`: SGLang's FA3 backend (sglang_work.py): FA3's configs
  and kernels, SGLang's op around them.

Every kernel's time is `kernel_s` (its duration on the GPU as CUPTI would time it, the kernel floor
included) plus `overhead_s`, the measurement protocol's cost for `launch_kernels(row)` kernels
(mpsim/sim/protocols.py; `graph` by default). A row with `kv_append` stands for two kernels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mpsim.kernels import launch_config as lc
from mpsim.sim.gpu.cublas_work import cublas_work
from mpsim.sim.gpu.fa3_work import fa3_decode_work, fa3_prefill_work
from mpsim.sim.gpu.framework_work import framework_work
from mpsim.sim.gpu.rates import GpuRates
from mpsim.sim.gpu.sglang_work import sglang_fa3_decode_work, sglang_fa3_prefill_work
from mpsim.sim.gpu.trtllm_attention_work import fmha_work, mmha_work, xqa_work
from mpsim.sim.gpu.trtllm_work import trtllm_wo_work
from mpsim.sim.gpu.work import LaunchWork
from mpsim.sim.params import SimParams

ExternalBuilder = Callable[[Mapping[str, Any], Mapping[str, int], list[int], GpuRates, SimParams,
                            float], LaunchWork]

EXTERNAL: dict[str, ExternalBuilder] = {
    lc.CUBLAS_GEMM: cublas_work,
    lc.TRTLLM_WO_GEMV: trtllm_wo_work,
    lc.FA3_DECODE: fa3_decode_work,
    lc.FA3_PREFILL: fa3_prefill_work,
    lc.VLLM_RMS_NORM: framework_work,
    lc.VLLM_ROPE: framework_work,
    lc.VLLM_SILU_MUL: framework_work,
    lc.TORCH_ADD: framework_work,
    lc.TRTLLM_XQA: xqa_work,
    lc.TRTLLM_MMHA: mmha_work,
    lc.TRTLLM_FMHA: fmha_work,
    lc.SGLANG_FA3_DECODE: sglang_fa3_decode_work,
    lc.SGLANG_FA3_PREFILL: sglang_fa3_prefill_work,
}
assert set(EXTERNAL) == set(lc.EXTERNAL_KERNELS)


def launch_kernels(row: Mapping[str, Any]) -> int:
    """How many GPU kernels one launch row stands for (what a per-kernel protocol cost multiplies)."""
    if str(row["kernel"]) in (lc.FA3_DECODE, lc.FA3_PREFILL, lc.SGLANG_FA3_DECODE,
                              lc.SGLANG_FA3_PREFILL):
        cfg = json.loads(str(row["config"]))
        return 1 + int(bool(cfg.get("kv_append", 0)))
    if str(row["kernel"]) == lc.TRTLLM_XQA:   # HMMA: the QKV-preprocessing kernel runs first
        return 2 - int(json.loads(str(row["config"])).get("gmma", 0))
    if str(row["kernel"]) == lc.TRTLLM_FMHA:  # the QKV-preprocessing kernel, then the FMHA
        return 2
    return 1
