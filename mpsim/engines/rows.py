"""One launch row rebuilt as an engine's kernel: the op and shape stay, the kernel, grid and config
become those of the library kernel the engine file names for the row's op, format and M on the
target architecture (`as_engine`). Synthesis builds a pass with mpsim's launchers and rebuilds each
row through this (mpsim/launch_plan.py); `simulate --reprice --engine` rebuilds a trace's rows.

Each row is built by the row builder of the library room that owns the kernel (mpsim/library: the
dispatch table `library_of`), so an engine's row is exactly what `mpsim op --kernel` or validation
would build for that kernel. A choice the room's own heuristic disagrees with (an mpsim GEMV named
where mpsim's launcher picks its tiled GEMM) is an error naming the file and the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpsim import library
from mpsim.engines.files import FUSED, NONE, Choice, Engine, kv_key
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.library import (
    act_quant,
    fa2,
    fa3,
    flashinfer_attention,
    flashinfer_trtllm,
    sglang,
    torch,
    trtllm,
    vllm,
)
from mpsim.library import mpsim as own
from mpsim.library import mpsim_fp as own_fp
from mpsim.library.collectives import ALLREDUCE_KERNELS, LIBRARY_OF_KERNEL
from mpsim.library.trtllm_attention import TRTLLM_FMHA, TRTLLM_MMHA, TRTLLM_XQA
from mpsim.library.trtllm_sm89 import TRTLLM_SM89_FMHA
from mpsim.library.trtllm_sm100 import TRTLLM_TG_CONTEXT, TRTLLM_TG_DECODE
from mpsim.traces.accounting import attention_window
from mpsim.traces.schema import COLLECTIVE_OPS

Row = dict[str, Any]

# The fp8 / fp4 GEMM kernels of issue 26 (the names shared with the fp8 GEMM work: FP8 contract):
# engine files name them; the rooms that build and price their rows (mpsim/library/cutlass_fp8.py,
# deepgemm.py, flashinfer_gemm.py, trtllm_fp8.py, vllm_fp8.py) come with that work. Until a room
# owns a name, a row for it is one error naming the kernel (`_build`).
LOWP_GEMM_KERNELS = ("cutlass_fp8_gemm", "trtllm_fp8_gemm", "deepgemm_fp8_block_gemm",
                     "flashinfer_fp8_block_gemm", "cutlass_fp8_block_gemm", "triton_fp8_block_gemm",
                     "flashinfer_nvfp4_gemm", "trtllm_nvfp4_gemm")
PENDING_KERNELS = tuple(k for k in LOWP_GEMM_KERNELS if k not in library.OWNER)

# The kernels of the dispatch table that can serve each op of an engine file (act_quant: the
# quantizers a GEMM choice's `act_quant` names).
KERNELS_BY_OP: dict[str, tuple[str, ...]] = {
    "embed": ("embedding_kernel",),
    "rms_norm": ("rms_norm_kernel", vllm.VLLM_RMS_NORM),
    "layer_norm": ("layer_norm_kernel",),
    "gemm": (*(k for k in own.KERNELS if k.startswith(("gemv_", "gemm_"))), *library.GEMM_KERNELS,
             *PENDING_KERNELS),
    "act_quant": (*act_quant.KERNELS, *own_fp.ACT_QUANT_KERNELS),
    # launches before a 16-bit-activation GEMM that scale its input per channel (AWQ's pre-quant
    # scale where the engine does not fold it into the GEMM)
    "pre_scale": trtllm.PRESCALE_KERNELS,
    "rope": ("rope_kernel", vllm.VLLM_ROPE),
    "kv_write": ("kv_quant_kernel", own_fp.KV_FP8_QUANT_KERNEL),
    "decode_attention": (lc.DECODE_ATTENTION_KERNEL, own_fp.DECODE_FP8_KERNEL, fa3.FA3_DECODE, TRTLLM_XQA,
                         TRTLLM_MMHA, sglang.SGLANG_FA3_DECODE, fa2.FA2_DECODE,
                         flashinfer_attention.FI_DECODE, flashinfer_trtllm.TG_DECODE, TRTLLM_TG_DECODE),
    "prefill_attention": ("attention_prefill_kernel", fa3.FA3_PREFILL, TRTLLM_FMHA,
                          sglang.SGLANG_FA3_PREFILL, fa2.FA2_PREFILL, flashinfer_attention.FI_PREFILL,
                          flashinfer_trtllm.TG_PREFILL, TRTLLM_TG_CONTEXT, TRTLLM_SM89_FMHA),
    "silu_mul": ("silu_mul_kernel", vllm.VLLM_SILU_MUL),
    "gelu": ("gelu_kernel",),
    "residual_add": ("residual_add_kernel", torch.TORCH_ADD),
    "sample": ("argmax_kernel",),
    # collectives are priced by mpsim/sim/collectives.py, not by a room of the dispatch table
    "allreduce": tuple(ALLREDUCE_KERNELS.values()),
}
for _op, _kernels in KERNELS_BY_OP.items():  # every one a kernel of the dispatch table (or pending)
    for _kernel in _kernels if _op != "allreduce" else ():
        if _kernel not in PENDING_KERNELS:
            library.library_of(_kernel)
# The op of a pass a row-wise kernel's row is (the norm and activation kernels of each kind).
ROWWISE_OP = {k: op for op in ("rms_norm", "layer_norm", "rope", "silu_mul", "gelu", "residual_add",
                               "embed", "sample") for k in KERNELS_BY_OP[op]}
IDENTITY = ("launch_id", "stream", "phase", "step", "layer", "module", "tp", "stage", "micro_batch")


@dataclass(frozen=True)
class Target:
    """What a row is rebuilt for: the engine, the GPU architecture (engines.files.ARCHES), the
    model's heads (query heads, KV heads, head dim, rotary dim: vLLM's rotary kernel is launched
    per head, mpsim's over the rotary dims), the SM count the other libraries' heuristics split over
    and mpsim's launch configs (GPU or interpreter)."""

    engine: Engine
    arch: str
    heads: tuple[int, int, int, int]
    sms: int = lc.GPU_SMS
    on_gpu: bool = True
    method: str | None = None  # the checkpoint's quantization method (files.QUANT_METHODS), if named


def allreduce_library(engine: Engine) -> str:
    """The library (schema.COMM_LIBRARIES) of the engine's all-reduce: its file's `allreduce` op."""
    return LIBRARY_OF_KERNEL[choose(engine, "allreduce", "any", 1, "hopper").kernel]


def op_of(row: Row) -> tuple[str, str, int]:
    """(op of the engine file, format key, M) of a launch row."""
    op = str(row["op"])
    if op == "gemm":
        return "gemm", str(row["w_format"]), int(row["m"])
    if op == "attention":
        tokens = int(row["batch"]) * int(row["q_len"])
        if int(row["q_len"]) == 1:
            return "decode_attention", kv_key(int(row["k_bits"]), _text(row.get("kv_format"))), tokens
        return "prefill_attention", "any", tokens
    if op == "kv_quant":
        return "kv_write", kv_key(int(row["k_bits"]), _text(row.get("kv_format"))), \
            int(row["batch"]) * int(row["q_len"])
    kernel = str(row["kernel"])
    if kernel not in ROWWISE_OP:
        raise MpsimInputError(f"launch {row.get('launch_id')} ({op}, kernel {kernel!r}): no engine op "
                              f"for this kernel; expected one of {sorted(ROWWISE_OP)}")
    return ROWWISE_OP[kernel], "any", int(row["m"])


def choose(engine: Engine, op: str, fmt: str, m: int, arch: str, n: int | None = None,
           k: int | None = None, method: str | None = None) -> Choice:
    """The first choice of (op, format) for `arch` whose cut-off takes M, whose shape requirements
    (n_multiple, k_multiple) N and K meet and that serves the checkpoint's quantization `method`
    (None: any; files.py makes sure one does)."""
    if fmt not in engine.formats(op):
        raise MpsimInputError(f"engine {engine.name!r} has no {op} kernel for {fmt}; its file "
                              f"({engine.file}) covers {list(engine.formats(op))}")
    for c in engine.choices(op, fmt):
        if c.takes(arch, m, n, k, method):
            return c
    raise AssertionError("engine files end every architecture with a choice for every M")


def as_engine(row: Row, target: Target) -> Row | None:
    """`row` (a launch row, costed or not) rebuilt as the target engine's kernel: a new uncosted row
    (grid a list, config a dict) with the same identity (launch, phase, step, layer, module); None
    where the engine fuses the op into its attention kernel (no launch of its own)."""
    if row["op"] in COLLECTIVE_OPS:  # a collective: the all-reduce by the engine's library
        out = {**row, "grid": [1], "config": {}}  # uncosted, as collective_row builds it
        if row["op"] == "allreduce":
            comm = allreduce_library(target.engine)
            out.update(kernel=ALLREDUCE_KERNELS[comm], comm_library=comm)
        return out
    op, fmt, m = op_of(row)
    choice = choose(target.engine, op, fmt, m, target.arch, *_nk(row), target.method)
    if choice.kernel == FUSED:
        return None
    where = f"engine {target.engine.name!r} ({target.engine.file}), {op} {fmt} at M={m} on {target.arch}"
    if choice.kernel == NONE:
        raise MpsimInputError(f"{where}: {target.engine.name} does not run this there: {choice.source}")
    try:
        out = _build(row, op, choice.kernel, target)
    except ValueError as exc:  # MpsimInputError too: the room's own message, placed
        raise MpsimInputError(f"{where}: {exc}") from None
    # an attention row's kernel is the named library's own dispatch rule's pick, whichever room
    # serves it (TensorRT-LLM's Blackwell op sends > 32 query heads a KV head to the MMHA of its
    # Hopper room: mpsim/library/trtllm_sm100.py); a GEMM's must be the one the file names
    if out["kernel"] != choice.kernel and not op.endswith("_attention"):
        raise MpsimInputError(f"{where}: the file names {choice.kernel} but that library launches "
                              f"{out['kernel']} there; fix the file's max_m cut-off")
    out.update({c: row[c] for c in IDENTITY if c in row})
    if op == "gemm":
        out["a_dtype"] = choice.a_dtype
    elif op in ("decode_attention", "prefill_attention", "kv_write") and _text(row.get("kv_format")):
        out["kv_format"] = row["kv_format"]  # the cache the policy stores (the room's own rule aside)
    return out


def engine_rows(row: Row, target: Target) -> list[Row]:
    """The launches the target engine makes for `row`: none (fused into its attention op), the
    rebuilt row, or, for a GEMM whose activations the engine quantizes (or scales per channel)
    first (the file's `act_quant`), that launch and then the GEMM."""
    out = as_engine(row, target)
    if out is None:
        return []
    if row["op"] != "gemm":
        return [out]
    op, fmt, m = op_of(row)
    choice = choose(target.engine, op, fmt, m, target.arch, *_nk(row), target.method)
    if choice.act_quant in (None, FUSED):
        return [out]
    assert choice.act_quant is not None
    build = trtllm.rowwise_row if choice.act_quant in trtllm.PRESCALE_KERNELS else act_quant.rowwise_row
    quant = build(choice.act_quant, int(row["m"]), int(row["k"]), sms=target.sms)
    quant.update({c: row[c] for c in IDENTITY if c in row})
    quant["module"] = f"{row.get('module', 'gemm')}_act_quant"
    return [quant, out]


def _nk(row: Row) -> tuple[int | None, int | None]:
    """(N, K) of a GEMM row (what a choice's shape requirements test); (None, None) otherwise."""
    return (int(row["n"]), int(row["k"])) if row["op"] == "gemm" else (None, None)


def _text(value: Any) -> str | None:
    """An optional text column value (None or pandas' NA: not given)."""
    return value if isinstance(value, str) else None


def _build(r: Row, op: str, kernel: str, t: Target) -> Row:
    """The row the owning room builds for `kernel` from the shape of `r`."""
    if kernel in PENDING_KERNELS:
        raise MpsimInputError(f"{kernel}: this build has no row builder or work model for it yet (the "
                              "fp8 / fp4 GEMM rooms of issue 26: mpsim/library/cutlass_fp8.py, "
                              "deepgemm.py, flashinfer_gemm.py, trtllm_fp8.py, vllm_fp8.py)")
    lib = library.library_of(kernel)
    mine = lib is library.MPSIM
    hq, hk, d, rot = t.heads
    if op == "gemm":
        assert lib.gemm is not None
        group = _opt(r.get("group_size"))
        gm, gn, gk = int(r["m"]), int(r["n"]), int(r["k"])
        # a library whose own choice is per architecture (cuBLAS's heuristic, its rows carrying the
        # instruction family `sm`; GemLite's shipped default) builds for the target's
        arch_config = library.ARCH_CONFIGS.get(kernel)
        config = (arch_config(kernel, gm, gn, gk, int(r["w_bits"]), group, t.sms, t.arch)
                  if arch_config else None)
        out = lib.gemm(None if mine else kernel, gm, gn, gk, str(r["w_format"]), int(r["w_bits"]),
                       group, bool(r.get("bias")), on_gpu=t.on_gpu, config=config, sms=t.sms)
        # the weights stay as the policy stores them: a room that prices them per channel (TensorRT-
        # LLM's GEMV) does not change their group size, whose scales the row's bytes count
        out["group_size"] = group
        return out
    if op in ("decode_attention", "prefill_attention"):
        lib = library.LIBRARIES[library.ARCH_ATTENTION.get((lib.name, t.arch), lib.name)]
        assert lib.attention is not None
        window = library.window_kwargs(lib, int(r["kv_len"]), attention_window(r))  # the row's
        out = lib.attention(int(r["batch"]), int(r["q_len"]), int(r["kv_len"]), int(r["num_q_heads"]),
                            int(r["num_kv_heads"]), int(r["head_dim"]), int(r["k_bits"]),
                            _opt(r.get("kv_block")), on_gpu=t.on_gpu, kv_append=False,
                            l2_warm=False, sms=t.sms, **window)
        if op == "decode_attention":  # a batch's KV tokens (serving: the sum of its lengths)
            out["kv_tokens"] = _opt(r.get("kv_tokens"))
        return out
    if op == "kv_write":
        return own.kv_write(_opt(r.get("layer")) or 0, int(r["batch"]), int(r["q_len"]),
                            int(r["num_kv_heads"]), int(r["head_dim"]), int(r["k_bits"]),
                            _opt(r.get("kv_block")), t.on_gpu)
    m, n = int(r["m"]), int(r["n"])
    if mine:  # mpsim's row-wise kernels: RoPE over the rotary dims, activations over 2n or n inputs
        k = rot if op == "rope" else _opt(r.get("k"))
        return own.rowwise(str(r["op"]), kernel, str(r.get("module")), _opt(r.get("layer")) or 0,
                           m, n, k, t.on_gpu)
    assert lib.rowwise is not None
    return lib.rowwise(kernel, m, n, heads=hq, kv_heads=hk, head_dim=d)


def _opt(value: Any) -> int | None:
    """An optional integer column value (None or pandas' NA: not applicable)."""
    try:
        return None if value is None or value != value else int(value)
    except TypeError:  # pandas.NA: `NA != NA` is NA, whose truth value raises
        return None
