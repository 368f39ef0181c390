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
from mpsim.engines.files import FUSED, Choice, Engine, kv_key
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc
from mpsim.library import (
    cublas,
    fa2,
    fa3,
    flashinfer_attention,
    flashinfer_trtllm,
    machete,
    marlin,
    sglang,
    torch,
    trtllm,
    turbomind,
    vllm,
)
from mpsim.library import mpsim as own
from mpsim.library.trtllm_attention import TRTLLM_FMHA, TRTLLM_MMHA, TRTLLM_XQA

Row = dict[str, Any]

# The kernels of the dispatch table that can serve each op of an engine file.
KERNELS_BY_OP: dict[str, tuple[str, ...]] = {
    "embed": ("embedding_kernel",),
    "rms_norm": ("rms_norm_kernel", vllm.VLLM_RMS_NORM),
    "layer_norm": ("layer_norm_kernel",),
    "gemm": (*(k for k in own.KERNELS if k.startswith(("gemv_", "gemm_"))), cublas.CUBLAS_GEMM,
             trtllm.TRTLLM_WO_GEMV, trtllm.TRTLLM_FPAINTB, marlin.MARLIN_GEMM, machete.MACHETE_GEMM,
             turbomind.TURBOMIND_GEMM),
    "rope": ("rope_kernel", vllm.VLLM_ROPE),
    "kv_write": ("kv_quant_kernel",),
    "decode_attention": (lc.DECODE_ATTENTION_KERNEL, fa3.FA3_DECODE, TRTLLM_XQA, TRTLLM_MMHA,
                         sglang.SGLANG_FA3_DECODE, fa2.FA2_DECODE, flashinfer_attention.FI_DECODE,
                         flashinfer_trtllm.TG_DECODE),
    "prefill_attention": ("attention_prefill_kernel", fa3.FA3_PREFILL, TRTLLM_FMHA,
                          sglang.SGLANG_FA3_PREFILL, fa2.FA2_PREFILL, flashinfer_attention.FI_PREFILL,
                          flashinfer_trtllm.TG_PREFILL),
    "silu_mul": ("silu_mul_kernel", vllm.VLLM_SILU_MUL),
    "gelu": ("gelu_kernel",),
    "residual_add": ("residual_add_kernel", torch.TORCH_ADD),
    "sample": ("argmax_kernel",),
}
for _kernels in KERNELS_BY_OP.values():  # every one a kernel of the dispatch table
    for _kernel in _kernels:
        library.library_of(_kernel)
# The op of a pass a row-wise kernel's row is (the norm and activation kernels of each kind).
ROWWISE_OP = {k: op for op in ("rms_norm", "layer_norm", "rope", "silu_mul", "gelu", "residual_add",
                               "embed", "sample") for k in KERNELS_BY_OP[op]}
IDENTITY = ("launch_id", "stream", "phase", "step", "layer", "module")


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


def op_of(row: Row) -> tuple[str, str, int]:
    """(op of the engine file, format key, M) of a launch row."""
    op = str(row["op"])
    if op == "gemm":
        return "gemm", str(row["w_format"]), int(row["m"])
    if op == "attention":
        tokens = int(row["batch"]) * int(row["q_len"])
        if int(row["q_len"]) == 1:
            return "decode_attention", kv_key(int(row["k_bits"])), tokens
        return "prefill_attention", "any", tokens
    if op == "kv_quant":
        return "kv_write", kv_key(int(row["k_bits"])), int(row["batch"]) * int(row["q_len"])
    kernel = str(row["kernel"])
    if kernel not in ROWWISE_OP:
        raise MpsimInputError(f"launch {row.get('launch_id')} ({op}, kernel {kernel!r}): no engine op "
                              f"for this kernel; expected one of {sorted(ROWWISE_OP)}")
    return ROWWISE_OP[kernel], "any", int(row["m"])


def choose(engine: Engine, op: str, fmt: str, m: int, arch: str) -> Choice:
    """The first choice of (op, format) for `arch` whose cut-off takes M (files.py makes sure one does)."""
    if fmt not in engine.formats(op):
        raise MpsimInputError(f"engine {engine.name!r} has no {op} kernel for {fmt}; its file "
                              f"({engine.file}) covers {list(engine.formats(op))}")
    for c in engine.choices(op, fmt):
        if arch in c.arch and (c.max_m is None or m <= c.max_m):
            return c
    raise AssertionError("engine files end every architecture with a choice for every M")


def as_engine(row: Row, target: Target) -> Row | None:
    """`row` (a launch row, costed or not) rebuilt as the target engine's kernel: a new uncosted row
    (grid a list, config a dict) with the same identity (launch, phase, step, layer, module); None
    where the engine fuses the op into its attention kernel (no launch of its own)."""
    op, fmt, m = op_of(row)
    choice = choose(target.engine, op, fmt, m, target.arch)
    if choice.kernel == FUSED:
        return None
    where = f"engine {target.engine.name!r} ({target.engine.file}), {op} {fmt} at M={m} on {target.arch}"
    try:
        out = _build(row, op, choice.kernel, target)
    except ValueError as exc:  # MpsimInputError too: the room's own message, placed
        raise MpsimInputError(f"{where}: {exc}") from None
    same_family = (op.endswith("_attention")  # the library's own dispatch rule picks its kernel
                   and library.library_of(str(out["kernel"])) is library.library_of(choice.kernel))
    if out["kernel"] != choice.kernel and not same_family:
        raise MpsimInputError(f"{where}: the file names {choice.kernel} but that library launches "
                              f"{out['kernel']} there; fix the file's max_m cut-off")
    out.update({c: row[c] for c in IDENTITY if c in row})
    return out


def _build(r: Row, op: str, kernel: str, t: Target) -> Row:
    """The row the owning room builds for `kernel` from the shape of `r`."""
    lib = library.library_of(kernel)
    mine = lib is library.MPSIM
    hq, hk, d, rot = t.heads
    if op == "gemm":
        assert lib.gemm is not None
        group = _opt(r.get("group_size"))
        out = lib.gemm(None if mine else kernel, int(r["m"]), int(r["n"]), int(r["k"]),
                       str(r["w_format"]), int(r["w_bits"]), group, bool(r.get("bias")),
                       on_gpu=t.on_gpu, config=None, sms=t.sms)
        # the weights stay as the policy stores them: a room that prices them per channel (TensorRT-
        # LLM's GEMV) does not change their group size, whose scales the row's bytes count
        out["group_size"] = group
        return out
    if op in ("decode_attention", "prefill_attention"):
        assert lib.attention is not None
        out = lib.attention(int(r["batch"]), int(r["q_len"]), int(r["kv_len"]), int(r["num_q_heads"]),
                            int(r["num_kv_heads"]), int(r["head_dim"]), int(r["k_bits"]),
                            _opt(r.get("kv_block")), on_gpu=t.on_gpu, kv_append=False,
                            l2_warm=False, sms=t.sms)
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
