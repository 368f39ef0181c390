"""Kernel libraries, one room each (docs/design.md#library-rooms): the dispatch table of the
synthesis floor. A room (mpsim/library/<name>.py) holds its kernel names, candidate configs and
heuristics and its row builders; its work model sits on the simulator's floor under the same name
(mpsim/sim/gpu/library/<name>.py). mpsim.launch_plan's `gemm_row`, `attention_row` and
`framework_op_row` dispatch through `gemm_library`, `attention_library` and `rowwise_library`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpsim.errors import MpsimInputError
from mpsim.kernels.launch_config import GPU_SMS, LaunchConfig
from mpsim.library import (
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
from mpsim.library.deepgemm_sm100 import deepgemm_sm100_config
from mpsim.library.rows import binding_window
from mpsim.library.trtllm_fpaintb import TRTLLM_FPAINTB

GemmBuilder = Callable[..., dict[str, Any]]
AttentionBuilder = Callable[..., dict[str, Any]]
RowwiseBuilder = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class Library:
    """One kernel library: its name, the kernels it owns, what it is, where its design comes from,
    and the row builders it offers (None: it builds no rows of that kind)."""

    name: str
    kernels: tuple[str, ...]
    description: str
    source: str
    gemm: GemmBuilder | None = None
    attention: AttentionBuilder | None = None
    rowwise: RowwiseBuilder | None = None
    ops: tuple[tuple[str, str], ...] = ()  # row-wise kernels: kernel -> op class
    # its attention builder takes a sliding `window` (keys a query sees) and says which it models;
    # False: a window covering every key is no window, a binding one an error (launch_plan)
    windowed: bool = False


LIBRARIES: dict[str, Library] = {lib.name: lib for lib in (
    Library("mpsim", mpsim.KERNELS, "mpsim's own Triton kernels (what capture runs)", "kernels/",
            gemm=mpsim.gemm_row, attention=mpsim.attention_row),
    Library("cublas", cublas.KERNELS, "cuBLAS fp16/bf16 GEMM (Hopper wgmma tiles, stream-K)",
            "cuBLAS on Hopper, measured", gemm=cublas.gemm_row),
    Library("trtllm", trtllm.KERNELS, "TensorRT-LLM's weight-only batched GEMV (int4/int8, M <= 4) "
            "and CUTLASS fpA_intB GEMM (M >= 5), and its attention op (XQA / MMHA decode with RoPE "
            "and KV append fused, context FMHA)",
            "cpp/tensorrt_llm/kernels/weightOnlyBatchedGemv, cutlass_kernels/fpA_intB_gemm, "
            "decoderMaskedMultiheadAttention/, preQuantScaleKernel.cu", gemm=trtllm.gemm_row,
            attention=trtllm.attention_row, rowwise=trtllm.rowwise_row, ops=tuple(trtllm.OPS.items()),
            windowed=True),
    Library("marlin", marlin.KERNELS, "vLLM's Marlin W4A16/W8A16 GEMM (gptq_marlin, awq_marlin)",
            "vllm csrc/quantization/gptq_marlin, IST-DASLab/marlin", gemm=marlin.gemm_row),
    Library("gemlite", gemlite.KERNELS, "GemLite's Triton A16Wn GEMV (split over K, atomic "
            "adds) and GEMMs, as torchao runs them in SGLang (--torchao-config gemlite-<bits>-<group>)",
            "mobiusml/gemlite 0.4.1 gemlite/triton_kernels/", gemm=gemlite.gemm_row),
    Library("machete", machete.KERNELS, "vLLM's Machete W4A16/W8A16 GEMM for Hopper",
            "vllm csrc/quantization/machete", gemm=machete.gemm_row),
    Library("turbomind", turbomind.KERNELS, "LMDeploy TurboMind's W4A16 GEMM (tiles an assumption)",
            "InternLM/lmdeploy src/turbomind/kernels/gemm", gemm=turbomind.gemm_row),
    Library("cutlass_fp8", cutlass_fp8.KERNELS, "CUTLASS fp8 W8A8 GEMMs (per-tensor/per-channel scaled "
            "and 128x128 block-scaled) as vLLM and SGLang run them",
            "vllm csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh",
            gemm=cutlass_fp8.gemm_row),
    Library("deepgemm", deepgemm.KERNELS, "DeepGEMM's fp8 1x128/128x128 block-scaled GEMM (vLLM, "
            "SGLang, TensorRT-LLM)", "deepseek-ai/DeepGEMM csrc/jit_kernels/heuristics/sm90.hpp",
            gemm=deepgemm.gemm_row),
    Library("flashinfer_gemm", flashinfer_gemm.KERNELS, "FlashInfer's fp8 block-scaled GEMM (vLLM, "
            "M < 32) and CuTe-DSL nvfp4 GEMM (vLLM on Blackwell)",
            "vllm model_executor/kernels/linear/scaled_mm/flashinfer.py", gemm=flashinfer_gemm.gemm_row),
    Library("trtllm_fp8", trtllm_fp8.KERNELS, "TensorRT-LLM's fp8 per-tensor GEMM (cuBLASLt "
            "cublas_scaled_mm) and nvfp4 GEMM as its PyTorch flow runs them",
            "tensorrt_llm/_torch/modules/linear.py", gemm=trtllm_fp8.gemm_row),
    Library("triton_fp8", triton_fp8.KERNELS, "vLLM's Triton W8A8 block-scaled fp8 GEMM (its path on "
            "sm_89, where DeepGEMM and CUTLASS's blockwise kernel do not run)",
            "vllm/model_executor/layers/quantization/utils/fp8_utils.py w8a8_triton_block_scaled_mm",
            gemm=triton_fp8.gemm_row),
    Library("fa3", fa3.KERNELS, "FlashAttention-3 decode/prefill as vLLM runs it",
            "hopper/ of flash-attention (heuristics.h)", attention=fa3.attention_row, windowed=True),
    Library("fa2", fa2.KERNELS, "FlashAttention-2 decode/prefill as vLLM runs it on Ampere/Ada",
            "csrc/flash_attn of vllm-project/flash-attention (flash_api.cpp, "
            "flash_fwd_launch_template.h)", attention=fa2.attention_row, windowed=True),
    Library("flashinfer_attention", flashinfer_attention.KERNELS,
            "FlashInfer's batch prefill kernel (FA2 template) as vLLM's FlashInfer backend runs "
            "decode (tensor cores) and prefill", "include/flashinfer/attention/{prefill,scheduler}.cuh",
            attention=flashinfer_attention.attention_row, windowed=True),
    Library("flashinfer_trtllm", flashinfer_trtllm.KERNELS,
            "the trtllm-gen decode/context kernels FlashInfer ships (vLLM on Blackwell; tiles assumed)",
            "flashinfer/decode.py trtllm_batch_decode_with_kv_cache, prefill.py "
            "trtllm_batch_context_with_kv_cache", attention=flashinfer_trtllm.attention_row, windowed=True),
    Library("trtllm_sm89", trtllm_sm89.KERNELS, "TensorRT-LLM's attention op on Ada: its QKV "
            "preprocessing, then fmha_v2's sm_89 context kernels, XQA's HMMA kernel (any cache) or "
            "MMHA", "cpp/kernels/fmha_v2/setup.py, cpp/tensorrt_llm/kernels/contextFusedMultiHeadAttention/"
            "fmhaRunner.cpp, cpp/kernels/xqa/mha.cu", attention=trtllm_sm89.attention_row,
            windowed=True),
    Library("trtllm_sm100", trtllm_sm100.KERNELS, "TensorRT-LLM's attention op on Blackwell: its QKV "
            "preprocessing, then the trtllm-gen generation / context kernels (MMHA above 32 query "
            "heads per KV head)", "cpp/tensorrt_llm/kernels/xqaDispatcher.cpp, fmhaDispatcher.cpp",
            attention=trtllm_sm100.attention_row, windowed=True),
    Library("sglang", sglang.KERNELS, "SGLang's FA3 attention backend (FA3's kernels, SGLang's op)",
            "python/sglang/srt/layers/attention/flashattention_backend.py", attention=sglang.attention_row,
            windowed=True),
    Library("sglang_triton", sglang_triton.KERNELS, "SGLang's Triton attention backend (split-KV decode "
            "in two stages, the extend kernel for prefill), as it serves models FA3 does not",
            "python/sglang/srt/layers/attention/triton_backend.py, triton_ops/decode_attention.py, "
            "triton_ops/extend_attention.py", attention=sglang_triton.attention_row, windowed=True),
    Library("vllm_triton", vllm_triton.KERNELS, "vLLM's Triton attention backend (TRITON_ATTN: one "
            "unified kernel, split into 16 segments plus a merge for small decode batches), as it "
            "serves shapes its other backends do not", "vllm/v1/attention/backends/triton_attn.py, "
            "vllm/v1/attention/ops/triton_unified_attention.py", attention=vllm_triton.attention_row,
            windowed=True),
    Library("vllm", vllm.KERNELS, "vLLM's row-wise kernels (RMSNorm, rotary embedding, SiLU-and-mul)",
            "vLLM csrc/ (Vidur's measured kernels)", rowwise=vllm.rowwise_row,
            ops=tuple(vllm.OPS.items())),
    Library("act_quant", act_quant.KERNELS, "activation quantization before W8A8 / A4 GEMMs "
            "(fp8 per token or per 1x128 group, nvfp4)", "vLLM csrc/quantization/fp8/common.cu, "
            "sgl-kernel per_token_group_quant_8bit.cu, vLLM csrc/quantization/fp4/nvfp4_quant_kernels.cu",
            rowwise=act_quant.rowwise_row, ops=tuple(act_quant.OPS.items())),
    Library("torch", torch.KERNELS, "PyTorch's vectorized elementwise add",
            "PyTorch ATen (Vidur's measured kernels)", rowwise=torch.rowwise_row,
            ops=tuple(torch.OPS.items())),
)}
MPSIM = LIBRARIES["mpsim"]
OWNER: dict[str, Library] = {}
for _lib in LIBRARIES.values():
    for _kernel in _lib.kernels:
        if _kernel in OWNER:
            raise RuntimeError(f"kernel {_kernel!r} is in two libraries: {OWNER[_kernel].name}, {_lib.name}")
        OWNER[_kernel] = _lib
EXTERNAL_KERNELS = tuple(k for k, lib in OWNER.items() if lib is not MPSIM)
ROWWISE_OPS: dict[str, str] = {k: op for lib in LIBRARIES.values() for k, op in lib.ops}
# what `gemm_row(kernel=...)` and `attention_row(kernel=...)` take besides None (mpsim's)
GEMM_KERNELS = tuple(k for k, lib in OWNER.items() if lib is not MPSIM and lib.gemm is not None
                     and k not in trtllm.ATTENTION_KERNELS)  # TensorRT-LLM's room holds both
ATTENTION_LIBRARIES = tuple(n for n, lib in LIBRARIES.items() if lib is not MPSIM and lib.attention)


# weight-only GEMM kernels -> their candidate configs (m, n, k, bits, group, sms, arch)
WO_CANDIDATES = {TRTLLM_FPAINTB: lambda m, n, k, bits, group, sms, arch: trtllm.plugin_candidates(
    m, n, k, bits, sms, arch), marlin.MARLIN_GEMM: marlin.candidates,
    machete.MACHETE_GEMM: machete.candidates, turbomind.TURBOMIND_GEMM: turbomind.candidates}
WO_GEMM_KERNELS = tuple(WO_CANDIDATES)
# autotuned GEMM kernels -> their autotuner's candidates (m, n, k, bits, group, sms, arch): the
# library times them at run time, so `--config best` and the engines validation take the model's
# fastest; without a search a row runs the library's shipped default config
AUTOTUNED_CANDIDATES = dict.fromkeys(gemlite.KERNELS, gemlite.candidates)
AUTOTUNED_KERNELS = tuple(AUTOTUNED_CANDIDATES)
# GEMM kernels whose library's own choice depends on the GPU architecture (engine rows are built
# for theirs): kernel -> (kernel, m, n, k, bits, group or None, SMs, engine-file architecture) -> config
ARCH_CONFIGS: dict[str, Callable[[str, int, int, int, int, int | None, int, str], LaunchConfig]] = {
    cublas.CUBLAS_GEMM: lambda kernel, m, n, k, bits, group, sms, arch: cublas.heuristic_for_arch(
        m, n, k, sms, arch),
    **dict.fromkeys(gemlite.KERNELS, lambda kernel, m, n, k, bits, group, sms, arch: (
        gemlite.default_config(kernel, m, n, k, group or k, arch))),
    # vLLM's cutlass_scaled_mm and cuBLASLt's fp8 GEMM run mma.sync kernels on Ada; vLLM's runs its
    # sm100 dispatch on Blackwell
    cutlass_fp8.CUTLASS_FP8_GEMM: lambda kernel, m, n, k, bits, group, sms, arch: (
        cutlass_fp8.cutlass_fp8_sm89_heuristic(m, n, k) if arch == "ada"
        else cutlass_fp8.cutlass_fp8_sm100_heuristic(m, n, k, sms) if arch == "blackwell"
        else cutlass_fp8.cutlass_fp8_heuristic(m, n, k, sms)),
    trtllm_fp8.TRTLLM_FP8_GEMM: lambda kernel, m, n, k, bits, group, sms, arch: (
        trtllm_fp8.fp8_sm89_heuristic(m, n, k, sms) if arch == "ada"
        else trtllm_fp8.fp8_heuristic(m, n, sms)),
    # DeepGEMM: sm_90's heuristic on Hopper, sm_100's (its own kernel) on Blackwell
    deepgemm.DEEPGEMM_FP8_BLOCK_GEMM: lambda kernel, m, n, k, bits, group, sms, arch: (
        deepgemm_sm100_config(kernel, m, n, k, sms) if arch == "blackwell"
        else deepgemm.deepgemm_config(m, n, k, sms)),
    # fp8_block_scaling_gemm: the sm_89 blockwise kernel on Ada, the vendored DeepGEMM on Hopper
    trtllm_fp8.TRTLLM_FP8_BLOCK_GEMM: lambda kernel, m, n, k, bits, group, sms, arch: (
        trtllm_fp8.fp8_block_sm89_config(m, n) if arch == "ada"
        else trtllm_fp8.fp8_block_sm90_config(m, n, k, sms)),
    # TensorRT-LLM's weight-only kernels: the GEMV's layout and fpA_intB's tiles by SM version
    trtllm.TRTLLM_FPAINTB: lambda kernel, m, n, k, bits, group, sms, arch: trtllm.engine_config(
        m, n, k, bits, sms, arch),
    trtllm.TRTLLM_WO_GEMV: lambda kernel, m, n, k, bits, group, sms, arch: trtllm.trtllm_wo_config(
        m, n, k, bits, arch)}
# attention libraries whose kernels run under another room's dispatch rule on an architecture
# ((library, engine-file architecture) -> the room whose row builder runs them there; validation
# and the engines both read it): TensorRT-LLM's op on Ada (sm_89: XQA's HMMA kernel over any cache,
# fmha_v2's sm_89 context kernels) and on Blackwell (sm_100: its preprocessing, then trtllm-gen)
ARCH_ATTENTION = {("trtllm", "ada"): "trtllm_sm89", ("trtllm", "blackwell"): "trtllm_sm100"}
# fp8 / fp4 scaled GEMM kernels -> their candidate configs (m, n, k, sms, GPU generation): the
# library's fixed heuristic where it has one (vLLM's CUTLASS dispatch, DeepGEMM's), else the tiles
# a search tries; generation `ampere` (mpsim.sim.gpu.arch) is Ada for these (fp8 needs sm_89)
SCALED_CANDIDATES = {kernel: room.candidates
                     for room in (cutlass_fp8, deepgemm, flashinfer_gemm, trtllm_fp8, triton_fp8)
                     for kernel in room.KERNELS}
SCALED_GEMM_KERNELS = tuple(SCALED_CANDIDATES)


def wo_candidates(kernel: str, m: int, n: int, k: int, bits: int, group: int, sms: int = GPU_SMS,
                  arch: str = "hopper") -> list[LaunchConfig]:
    """Every config a model-guided search may pick for a weight-only GEMM kernel (the library's own
    one where it has a fixed heuristic: Marlin, Machete); `arch`: the candidate family."""
    if kernel not in WO_CANDIDATES:
        raise ValueError(f"not a weight-only GEMM kernel: {kernel!r}; expected one of {WO_GEMM_KERNELS}")
    return WO_CANDIDATES[kernel](m, n, k, bits, group, sms, arch)


def get_library(name: str) -> Library:
    """The library called `name`; an unknown name is an error naming the known ones."""
    if name not in LIBRARIES:
        raise MpsimInputError(f"unknown kernel library {name!r}; expected one of {sorted(LIBRARIES)}")
    return LIBRARIES[name]


def library_of(kernel: str) -> Library:
    """The library that owns `kernel`; an unknown kernel is an error naming the known ones."""
    if kernel not in OWNER:
        raise MpsimInputError(f"unknown kernel {kernel!r}; expected one of {sorted(OWNER)}")
    return OWNER[kernel]


def gemm_library(kernel: str | None) -> GemmBuilder:
    """The GEMM row builder for `kernel` (None: mpsim's); ValueError naming the known ones."""
    lib = MPSIM if kernel is None else OWNER.get(kernel)
    if lib is None or lib.gemm is None or (kernel is not None and kernel not in GEMM_KERNELS):
        raise ValueError(f"unknown GEMM kernel {kernel!r}; expected None (mpsim's), "
                         f"{' or '.join(GEMM_KERNELS)}")
    return lib.gemm


def attention_library(name: str | None) -> Library:
    """The library whose attention rows `name` names (None: mpsim's); an error naming the known
    ones."""
    lib = MPSIM if name is None else LIBRARIES.get(name)
    if lib is None or lib.attention is None or (lib is MPSIM and name is not None):
        raise MpsimInputError(f"attention: unknown kernel {name!r}; expected None (mpsim's) or "
                              f"{' or '.join(repr(n) for n in ATTENTION_LIBRARIES)}")
    return lib


WINDOWED_LIBRARIES = tuple(n for n, lib in LIBRARIES.items() if lib.windowed)


def window_kwargs(lib: Library, kv_len: int, window: int) -> dict[str, int]:
    """What `lib`'s attention builder takes for a sliding `window` (the keys a query sees, 0: none):
    the window itself where the room takes one (it says which it models); nothing where the window
    covers every key (kv_len <= window: the kernels visit the same tiles); one error where it binds
    and the room models none."""
    if lib.windowed and window:
        return {"window": window}
    if binding_window(kv_len, window):
        raise MpsimInputError(f"attention: a sliding window of {window} keys over {kv_len} is not "
                              f"modelled for {lib.name}'s kernels (the rooms that take one: "
                              f"{', '.join(WINDOWED_LIBRARIES)}; each says which)")
    return {}


def rowwise_library(kernel: str) -> RowwiseBuilder:
    """The row builder of another framework's row-wise `kernel`; an error naming the known ones."""
    lib = OWNER.get(kernel)
    if lib is None or lib.rowwise is None:
        raise MpsimInputError(f"unknown row-wise kernel {kernel!r}; expected one of {list(ROWWISE_OPS)}")
    return lib.rowwise
