"""THE ADAPTER: one validated measured row -> the trace rows mpsim prices for it.

    launch_rows(row, hw, config, params, configs) -> LaunchGroup(launches, main)

This is the one place that decides which kernel, launch config and shapes stand for a published
measurement. Everything else in validation (readers, protocols, metrics, plots, calibration) works
on whatever it returns, through the one door `mpsim.sim.simulate`. The kernels are the ones the
measurements ran, priced by name (the library rooms, mpsim/library/ and mpsim/sim/gpu/library/):

- gemm, 16-bit weights: `cublas_gemm`, the model-guided best config (mpsim.sim.best_config over
  cublas.cublas_candidates) or, with config "heuristic", cublas.cublas_heuristic;
- gemm, per-channel int4/int8 weights (group_size = k; TRT-LLM's WeightOnlyQuantMatmul plugin, or
  a row naming no kernel): m <= 4 `trtllm_wo_gemv` (TensorRT-LLM's weight-only batched GEMV), m >= 5
  `trtllm_fpaintb_gemm` (its CUTLASS fpA_intB GEMM, the best of the plugin profiler's tactics);
  every other quantized format: mpsim's own Triton kernels (best config over lc.gemm_candidates, or
  the heuristic); a 16-bit row names PyTorch's linear (cuBLAS) or is unrepresentable (gemm_kernel);
- attention: the kernel that ran the row, by its (framework, kernel_source) (`attention_kernel`,
  docs/validation.md "Which kernel stands for a row"): vLLM's FA3 (`fa3_decode` / `fa3_prefill`,
  the `kv_append` scope a second kernel; also every row that names no kernel), SGLang's FA3
  backend (`sglang_fa3_decode` / `_prefill`), TensorRT-LLM's op on Hopper (`trtllm_xqa_decode` or
  `trtllm_mmha_decode` by its dispatch rule, `trtllm_context_fmha`; RoPE and KV append inside the
  op); any other named kernel (FA4, FA2, FlashInfer, Triton, TRT-LLM off Hopper) is
  unrepresentable, never priced as another. Decode keeps the KV cache warm in L2 across the
  repeated calls of every protocol except `trt-profiler` (one profiled run, L2 cold); a 4-bit
  cache: mpsim's decode kernel (its KV append a separate `kv_quant_kernel` launch); a prefill over
  a longer cache (q_len < kv_len, a chunk after cached tokens: no published table has one) is
  priced by the same kernel's room, its queries the last q_len positions;
- the `rope` scope of an FA3-priced row: a `vllm_rotary_embedding` launch first;
- rmsnorm, silu_mul, rope, add: vLLM's `vllm_rms_norm`, `vllm_silu_and_mul`,
  `vllm_rotary_embedding` and PyTorch's `torch_add`; an add measured inside a model's forward
  (`in_forward`, set by the Vidur reader) reads its second input warm from L2 (the previous kernel's
  output).

Launches come in the order the framework runs them (scope first: RoPE, then the attention with its
KV append); `main` indexes the measured op itself, whose config the rows file reports.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from mpsim import library
from mpsim.analysis.validation.fp8_rows import FLOAT_FORMATS, NotModelledError, scaled_kernel
from mpsim.analysis.validation.fp8_rows import weight_copies as scaled_copies  # vs weight_copies.py's
from mpsim.analysis.validation.sources import TRTLLM_FLASHINFER
from mpsim.analysis.validation.weight_copies import weight_copies
from mpsim.engines import architecture
from mpsim.errors import MpsimInputError
from mpsim.hw_models.schema import GpuSpec, HardwareSpec
from mpsim.kernels import launch_config as lc
from mpsim.launch_plan import attention_row, costed, framework_op_row, gemm_row
from mpsim.library import cublas, torch, trtllm, vllm
from mpsim.library.rows import with_config
from mpsim.library.scaled_gemm import with_call
from mpsim.sim.best_config import (
    best_config,
    best_gemm_row,
    cublas_fixed_config,
    gemm_candidate_configs,
)
from mpsim.sim.gpu.arch import generation
from mpsim.sim.params import DEFAULT_PARAMS, SimParams
from mpsim.sim.protocols import scope_launches

Row = dict[str, Any]
CONFIG_CHOICES = ("best", "heuristic")
# Best GEMM configs already found, by shape key -> candidate name (predict.py keeps it on disk
# next to the memo, in a namespace of the hardware, parameters and model code).
ConfigCache = MutableMapping[str, str]


@dataclass(frozen=True)
class LaunchGroup:
    launches: list[Row]
    main: int


class UnrepresentableError(ValueError):
    """The row is well formed but the model has no launch for it (the message says why)."""


def launch_rows(row: Mapping[str, Any], hw: HardwareSpec, config: str = "best",
                params: SimParams = DEFAULT_PARAMS, configs: ConfigCache | None = None) -> LaunchGroup:
    """The launches one measured call runs on `hw`, as trace rows (`row`: a generic measured row)."""
    if config not in CONFIG_CHOICES:
        raise ValueError(f"config {config!r}: expected one of {CONFIG_CHOICES}")
    op = str(row["op"])
    try:
        if op == "gemm":
            return LaunchGroup([one_run(with_weight_copies(_gemm(row, hw, config, params, configs),
                                                           row, hw), row)], 0)
        if op == "attention":
            return _attention_group(row, hw)
        if op in ROWWISE:
            return LaunchGroup([_rowwise(op, row)], 0)
    except MpsimInputError as exc:
        raise UnrepresentableError(str(exc)) from None
    raise UnrepresentableError(f"op {op!r} has no mpsim launch")


def _int(row: Mapping[str, Any], key: str) -> int:
    return int(row[key])


def _window(row: Mapping[str, Any]) -> int:
    """The row's sliding window (keys a query sees; a missing or empty cell: none)."""
    value = row.get("window")
    try:
        return 0 if value is None or value != value else int(value)
    except TypeError:  # pandas.NA: its comparisons are NA, whose truth value raises
        return 0


# kernel_source values that name a 16-bit GEMM through PyTorch (cuBLAS): aiconfigurator's TRT-LLM
# torch flow, vLLM (0.24: torch.nn.functional.linear, 0.14: vllm_default) and SGLang.
TORCH_LINEAR = ("", "torch_flow", "torch.nn.functional.linear", "vllm_default", "sglang_torch_linear")
WO_PLUGIN = "WeightOnlyQuantMatmul"  # TRT-LLM's TensorRT plugin layer (trt_flow_..._0)


def gemm_kernel(m: int, k: int, fmt: str, group: int | None, source: str = "") -> str | None:
    """The kernel that ran a measured GEMM (None: mpsim's own Triton kernels), by TRT-LLM's and
    PyTorch's own dispatch: 16-bit -> cuBLAS; per-channel int4/int8 (TRT-LLM's
    WeightOnlyQuantMatmul plugin, or a row naming no kernel) -> the plugin, `trtllm_fpaintb_gemm`,
    whose profiled tactics include the batched GEMV below M = 16 (trtllm.plugin_candidates: the
    config search keeps the fastest, as the plugin's profiler does); other quantized formats ->
    mpsim's kernels."""
    if fmt == "fp16":
        if source not in TORCH_LINEAR:
            raise UnrepresentableError(f"16-bit GEMM kernel {source!r} is not modelled")
        return cublas.CUBLAS_GEMM
    per_channel = group in (0, k)
    if fmt in ("int4-group", "int8-group") and per_channel and (not source or WO_PLUGIN in source):
        return trtllm.TRTLLM_FPAINTB
    if source:
        raise UnrepresentableError(f"weight-only GEMM kernel {source!r} is not modelled")
    return None


def with_weight_copies(launch: Row, row: Mapping[str, Any], hw: HardwareSpec) -> Row:
    """A cuBLAS launch with the weight copies its collector cycled (`w_copies` in its config, read
    by the cuBLAS room's L2 model; weight_copies.py has the rules per collector)."""
    if launch["kernel"] != cublas.CUBLAS_GEMM or not isinstance(hw, GpuSpec):
        return launch
    copies = weight_copies(str(row.get("framework") or ""), str(row.get("fw_version") or ""),
                           "bfloat16", _int(row, "m"), _int(row, "n"), _int(row, "k"),
                           hw.l2.size_MiB * 2**20, hw.dram.size_GB * 1e9)
    if copies == 0:  # a source whose collector is not known: weights from DRAM, config unchanged
        return launch
    return with_config(launch, "w_copies", copies)


def one_run(launch: Row, row: Mapping[str, Any]) -> Row:
    """A launch TensorRT's per-layer profiler timed (`trt-profiler`: one profiled inference, each
    layer run once between host-side gaps), marked `one_run` in its config: it starts at the boost
    clock and has not settled to the power-limited one (mpsim/sim/gpu/model.py one_run_clock)."""
    if str(row.get("protocol")) != "trt-profiler":
        return launch
    return with_config(launch, "one_run", 1)


def _gemm(row: Mapping[str, Any], hw: HardwareSpec, config: str, params: SimParams,
          configs: ConfigCache | None) -> Row:
    if str(row["w_format"]) in FLOAT_FORMATS:
        return _scaled_gemm(row, hw, params, configs)
    m, n, k = _int(row, "m"), _int(row, "n"), _int(row, "k")
    fmt, bits = str(row["w_format"]), _int(row, "w_bits")
    group = row.get("group_size")
    group = None if group is None or group != group else int(group)
    kernel = gemm_kernel(m, k, fmt, group, str(row.get("kernel_source") or ""))
    if kernel in (trtllm.TRTLLM_WO_GEMV, trtllm.TRTLLM_FPAINTB) or group == 0:
        group = k
    if config == "heuristic":
        fixed = cublas_fixed_config(m, n, k, hw) if kernel == cublas.CUBLAS_GEMM else None
        return gemm_row(m, n, k, fmt, bits, group, kernel=kernel, config=fixed, sms=hw.compute_units)
    tune_m = profiled_m(kernel, m)
    key = json.dumps([tune_m, n, k, fmt, bits, group, kernel])
    name = configs.get(key) if configs is not None else None
    if name is None:
        best = best_gemm_row(tune_m, n, k, fmt, bits, group, hw=hw, kernel=kernel, params=params)
        name = best.config.name()
        if configs is not None:
            configs[key] = name
        if tune_m == m:
            return best.row
    probe = gemm_row(m, n, k, fmt, bits, group, kernel=kernel, sms=hw.compute_units)
    cands = gemm_candidate_configs(m, n, k, probe["w_format"], int(probe["w_bits"]),
                                   probe["group_size"], hw, kernel)
    found = [c for c in cands if c.name() == name]
    if found:
        return gemm_row(m, n, k, fmt, bits, group, kernel=kernel, config=found[0],
                        sms=hw.compute_units)
    return best_gemm_row(m, n, k, fmt, bits, group, hw=hw, kernel=kernel, params=params).row


def _scaled_gemm(row: Mapping[str, Any], hw: HardwareSpec, params: SimParams,
                 configs: ConfigCache | None) -> Row:
    """An fp8 / fp8_block / nvfp4 row: the kernel its kernel_source names (fp8_rows.py), its
    library's config (a fixed heuristic, or the model's pick among the library's tiles), with the
    call's activation quantization and the weight's L2 residency between calls set."""
    try:
        kernel, quant = scaled_kernel(row, hw)
    except NotModelledError as exc:
        raise UnrepresentableError(str(exc)) from None
    m, n, k = _int(row, "m"), _int(row, "n"), _int(row, "k")
    fmt, bits = str(row["w_format"]), _int(row, "w_bits")
    group = None if str(row.get("group_size")) in ("None", "nan", "<NA>") else int(row["group_size"])
    copies = scaled_copies(row, hw) if isinstance(hw, GpuSpec) else 0
    try:  # the kernel's room refuses an architecture it does not run (DeepGEMM on Ada, ...)
        tiles = gemm_candidate_configs(m, n, k, fmt, bits, group, hw, kernel)
    except MpsimInputError as exc:
        source = row.get("kernel_source")
        raise UnrepresentableError(f"{source} on {hw.name} not modelled: {exc}") from None
    cands = [with_call(c, quant, copies) for c in tiles]
    build = partial(gemm_row, m, n, k, fmt, bits, group, kernel=kernel, sms=hw.compute_units)
    if len(cands) == 1:
        return build(config=cands[0])
    key = json.dumps([m, n, k, fmt, bits, group, kernel, quant, copies])
    name = configs.get(key) if configs is not None else None
    found = [c for c in cands if c.name() == name]
    if found:
        return build(config=found[0])
    best = best_config(lambda c: build(config=c), cands, hw, params)
    if configs is not None:
        configs[key] = best.config.name()
    return best.row


MAX_PROFILE_M = 8192  # TRT-LLM gemmPluginProfiler: tactics profiled at powers of two up to this


def profiled_m(kernel: str | None, m: int) -> int:
    """The M whose fastest tactic runs an M-row call: TRT-LLM's plugin profiler times the tactics
    at every M below 16 and at powers of two above, and getBestConfig looks up M itself where it
    was profiled, else min(nextPowerOfTwo(m), MAX_PROFILE_M) (gemmPluginProfiler.cpp: with the
    CUDA kernel enabled, M from the shape's minimum to 15 one by one); cuBLAS and mpsim's kernels
    are tuned at M itself."""
    if kernel != trtllm.TRTLLM_FPAINTB or m <= trtllm.TRTLLM_WO_GEMV_MAX_ROWS:
        return m
    return min(1 << (m - 1).bit_length(), MAX_PROFILE_M)


# (framework, kernel_source) of a published attention row -> the kernel family that prices it
# (docs/validation.md "Which kernel stands for a row"); a row naming anything else is unrepresentable.
ATTENTION_KERNELS = {
    ("vllm", "vllm_flash_attn_fa3"): "fa3",
    ("vllm", "vllm_flash_attn_fa2"): "fa2",
    ("vllm", "vllm_flashinfer_fidecode"): "flashinfer_attention",
    ("vllm", "vllm_flashinfer_fiprefill"): "flashinfer_attention",
    ("vllm", "vllm_flashinfer_trtllmdecode"): "flashinfer_trtllm",
    ("vllm", "vllm_flashinfer_trtllmprefill"): "flashinfer_trtllm",
    ("sglang", "fa3"): "sglang",
    ("sglang", "triton"): "sglang_triton",
    ("vllm", "vllm_triton_attn"): "vllm_triton",
    ("trtllm", "torch_flow"): "trtllm",
    # TensorRT-LLM's FlashInfer backend with its trtllm-gen sub-backend (Gemma 4's pin, the
    # collector's too): the trtllm-gen kernels, TensorRT-LLM's op around them (qkv_cast below)
    ("trtllm", "torch_flow_flashinfer"): "flashinfer_trtllm",
}
# the dispatch rule read is TensorRT-LLM's sm_90 one (SGLang's Triton tiles: their sm_90 ones); its
# sm_89 and sm_100 ones are rooms of their own (library.ARCH_ATTENTION, by the engine files'
# architecture, as the engines build them); sm_80 (A100) picks tiled context kernels above 64 keys,
# not modelled
ENGINE_GENERATION = {"trtllm": "hopper", "sglang_triton": "hopper"}
ELSEWHERE = {  # (kernel, generation): what is modelled beyond the kernel's generation
    ("trtllm", "ampere"): ", and its bf16-cache decode on Ampere (sm_80): the context FMHA (tiled "
                          "above 64 keys there) and fp8 caches are modelled on Ada (sm_89) only",
}
# vLLM's kernels: the measured op also ran vLLM's KV append (reshape_and_cache_flash, a kernel of
# its own) and, in the `rope` scope, its rotary kernel first
VLLM_ATTENTION = ("fa3", "fa2", "flashinfer_attention", "flashinfer_trtllm", "vllm_triton")
WARM_PREFILL = ("fa2", "flashinfer_attention", "flashinfer_trtllm")


def attention_kernel(row: Mapping[str, Any], hw: HardwareSpec) -> str:
    """The kernel family standing for a measured attention row: by its (framework, kernel_source);
    a row naming neither (a hand-written CSV row) is vLLM's FA3, as before sources named kernels."""
    framework = str(row.get("framework") or "").lower()
    source = str(row.get("kernel_source") or "")
    if not framework and not source:
        return "fa3"
    kernel = ATTENTION_KERNELS.get((framework, source))
    if kernel is None:
        raise UnrepresentableError(f"{source or framework} not modeled")
    other = library.ARCH_ATTENTION.get((kernel, architecture(hw))) if isinstance(hw, GpuSpec) else None
    if other is not None:
        return other
    need = ENGINE_GENERATION.get(kernel)
    gen = generation(hw) if isinstance(hw, GpuSpec) else None
    if need is not None and gen != need:
        # TensorRT-LLM on Ampere (sm_80): the bf16-cache generation kernels are XQA's HMMA kernel
        # and MMHA, the same kernels and dispatch rule as on sm_90 (the Ada room's decode too)
        decode = str(row.get("cls") or "attention decode").startswith("attention decode")
        if kernel == "trtllm" and gen == "ampere" and decode and int(row["q_len"]) == 1 \
                and int(row["kv_bits"]) == 16:
            return kernel
        raise UnrepresentableError(f"{source} on {hw.name} not modeled (the {framework} dispatch "
                                   f"rule is modelled for {need} only"
                                   f"{ELSEWHERE.get((kernel, str(gen)), '')})")
    return kernel


def _attention_group(row: Mapping[str, Any], hw: HardwareSpec) -> LaunchGroup:
    scope = scope_launches(str(row.get("includes") or ""))
    batch, q_len, kv_len = _int(row, "batch"), _int(row, "q_len"), _int(row, "kv_len")
    heads, kv_heads, d = _int(row, "heads"), _int(row, "kv_heads"), _int(row, "head_dim")
    bits = _int(row, "kv_bits")
    window = _window(row)  # a sliding window (launch_plan.attention_row's rule)
    if bits == 4:  # no published kernel has a 4-bit cache: mpsim's own decode kernel
        before = [_kv_quant(batch, q_len, kv_heads, d, bits)] if "kv_append" in scope else []
        return LaunchGroup([*before, attention_row(batch, q_len, kv_len, heads, kv_heads, d, bits,
                                                   window=window)], len(before))
    kernel = attention_kernel(row, hw)
    warm = q_len == 1 and str(row.get("protocol")) != "trt-profiler"
    if kernel not in VLLM_ATTENTION:  # the op holds its RoPE and KV append (mpsim/library/<kernel>.py)
        fp8 = str(row.get("attn_dtype") or "") == "fp8"
        return LaunchGroup([attention_row(batch, q_len, kv_len, heads, kv_heads, d, bits,
                                          kernel=kernel, l2_warm=warm, sms=hw.compute_units,
                                          fp8_attention=fp8, window=window)], 0)
    before = [_rowwise("rope", {"tokens": batch * q_len, "heads": heads, "kv_heads": kv_heads,
                                "head_dim": d})] if "rope" in scope else []
    # FA2's and FlashInfer's prefill rows replay too: Q, K, V that fit the L2 are read from it
    warm = warm or (kernel in WARM_PREFILL and str(row.get("protocol")) != "trt-profiler")
    main = attention_row(batch, q_len, kv_len, heads, kv_heads, d, bits, kernel=kernel,
                         kv_append="kv_append" in scope, l2_warm=warm, sms=hw.compute_units,
                         window=window)
    if bits == 8 and str(row.get("kernel_source") or "") == TRTLLM_FLASHINFER:
        main = with_config(main, "qkv_cast", 1)  # its op casts K, V and Q to e4m3 first
    return LaunchGroup([*before, main], len(before))


# op -> the framework kernel that ran it
ROWWISE = {"rmsnorm": vllm.VLLM_RMS_NORM, "silu_mul": vllm.VLLM_SILU_MUL, "add": torch.TORCH_ADD,
           "rope": vllm.VLLM_ROPE}


def _rowwise(op: str, row: Mapping[str, Any]) -> Row:
    kernel, tokens = ROWWISE[op], _int(row, "tokens")
    if op == "rope":
        return framework_op_row(kernel, tokens, _int(row, "heads") * _int(row, "head_dim"),
                                heads=_int(row, "heads"), kv_heads=_int(row, "kv_heads"),
                                head_dim=_int(row, "head_dim"))
    in_forward = bool(row.get("in_forward"))
    return framework_op_row(kernel, tokens, _int(row, "hidden"), l2_warm=op == "add" and in_forward)


def _kv_quant(batch: int, q_len: int, kv_heads: int, d: int, bits: int) -> Row:
    """The KV-cache append of mpsim's kernels: one kv_quant_kernel launch over the new tokens."""
    tokens = batch * q_len
    cfg = lc.kv_quant_config(tokens, kv_heads, d, bits)
    return costed({"op": "kv_quant", "module": "kv_write", "batch": batch, "q_len": q_len,
                   "num_kv_heads": kv_heads, "head_dim": d, "k_bits": bits, "v_bits": bits,
                   "launch_id": 0, "stream": 0, "step": 0, "layer": 0,
                   "phase": "decode" if tokens <= lc.GEMV_MAX_ROWS else "prefill",
                   "kernel": cfg.kernel, "grid": list(cfg.grid), "config": cfg.config_dict()})
