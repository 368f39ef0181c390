"""One launch row rebuilt as an engine's kernel: the op and shape stay, the kernel, grid and config
become those of the library kernel the engine file names for the row's op, format and M on the
target architecture (`as_engine`). Synthesis builds a pass with mpsim's launchers and rebuilds each
row through this (mpsim/launch_plan.py); `simulate --reprice --engine` rebuilds a trace's rows.

The builders by kernel are the library's own configs (kernels/launch_config.py for mpsim's kernels,
kernels/external_configs.py for the others): a kernel name the table below does not know is an
error naming the known ones, and so is a choice the library's own heuristic disagrees with (an
mpsim GEMV named where mpsim's launcher picks its tiled GEMM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpsim.engines.files import Choice, Engine, kv_key
from mpsim.errors import MpsimInputError
from mpsim.kernels import launch_config as lc

Row = dict[str, Any]

MPSIM_GEMM = tuple(f"{s}_{t}_kernel" for s in ("gemv", "gemm") for t in ("fp16", "group", "anyprec"))
MPSIM_ROWWISE = ("rms_norm_kernel", "layer_norm_kernel", "rope_kernel", "residual_add_kernel",
                 "silu_mul_kernel", "gelu_kernel", "embedding_kernel", "argmax_kernel")
MPSIM_ATTENTION = (lc.DECODE_ATTENTION_KERNEL, "attention_prefill_kernel")
MPSIM_KV_WRITE = "kv_quant_kernel"
# The op of a pass a row-wise kernel's row is (the norm and activation kernels of each kind).
ROWWISE_OP = {"rms_norm_kernel": "rms_norm", lc.VLLM_RMS_NORM: "rms_norm", "layer_norm_kernel": "layer_norm",
              "silu_mul_kernel": "silu_mul", lc.VLLM_SILU_MUL: "silu_mul", "gelu_kernel": "gelu",
              "rope_kernel": "rope", lc.VLLM_ROPE: "rope", "residual_add_kernel": "residual_add",
              lc.TORCH_ADD: "residual_add", "embedding_kernel": "embed", "argmax_kernel": "sample"}


@dataclass(frozen=True)
class Target:
    """What a row is rebuilt for: the engine, the GPU architecture (engines.files.ARCHES), the SM
    count the other libraries' heuristics split over, mpsim's launch configs (GPU or interpreter),
    and the model's heads (query heads, KV heads, head dim, rotary dims: vLLM's rotary kernel is
    launched per head, mpsim's over the rotary dims)."""

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


def as_engine(row: Row, target: Target) -> Row:
    """`row` (a launch row, costed or not) rebuilt as the target engine's kernel: a new uncosted row
    (grid a list, config a dict) with the same identity and shape columns."""
    op, fmt, m = op_of(row)
    choice = choose(target.engine, op, fmt, m, target.arch)
    builder = BUILDERS.get(choice.kernel)
    if builder is None:
        raise MpsimInputError(f"engine {target.engine.name!r}: kernel {choice.kernel!r} has no row "
                              f"builder; expected one of {sorted(BUILDERS)}")
    out = {k: v for k, v in row.items() if k not in ("flops", "bytes_read", "bytes_written")}
    try:
        cfg = builder(out, target)
    except ValueError as exc:
        raise MpsimInputError(f"engine {target.engine.name!r} ({target.engine.file}), {op} {fmt} at "
                              f"M={m} on {target.arch}: {exc}") from None
    if cfg.kernel != choice.kernel:
        raise MpsimInputError(f"engine {target.engine.name!r} ({target.engine.file}), {op} {fmt} at "
                              f"M={m}: the file names {choice.kernel} but that library launches "
                              f"{cfg.kernel} there; fix the file's max_m cut-off")
    out.update(kernel=cfg.kernel, grid=list(cfg.grid), config=cfg.config_dict())
    return out


Builder = Callable[[Row, Target], lc.LaunchConfig]


def _mpsim_gemm(r: Row, t: Target) -> lc.LaunchConfig:
    return lc.gemm_config(int(r["m"]), int(r["n"]), int(r["k"]), str(r["w_format"]), int(r["w_bits"]),
                          _opt(r.get("group_size")), on_gpu=t.on_gpu)


def _cublas(r: Row, t: Target) -> lc.LaunchConfig:
    if r["w_format"] != "fp16":
        raise ValueError(f"{lc.CUBLAS_GEMM} prices 16-bit weights (fp16/bf16), got {r['w_format']}")
    return lc.cublas_heuristic(int(r["m"]), int(r["n"]), int(r["k"]), t.sms)


def _trtllm_wo(r: Row, t: Target) -> lc.LaunchConfig:
    if r["w_format"] not in ("int4-group", "int8-group"):
        raise ValueError(f"{lc.TRTLLM_WO_GEMV} prices int4/int8 weights, got {r['w_format']}")
    return lc.trtllm_wo_config(int(r["m"]), int(r["n"]), int(r["k"]), int(r["w_bits"]))


def _heads(r: Row) -> tuple[int, int, int, int, int, int]:
    return (int(r["batch"]), int(r["q_len"]), int(r["kv_len"]), int(r["num_q_heads"]),
            int(r["num_kv_heads"]), int(r["head_dim"]))


def _mpsim_decode(r: Row, t: Target) -> lc.LaunchConfig:
    b, _, kv, hq, hk, d = _heads(r)
    return lc.attention_decode_config(b, hq, hk, d, kv, int(r["k_bits"]), _opt(r.get("kv_block")),
                                      on_gpu=t.on_gpu)


def _mpsim_prefill(r: Row, t: Target) -> lc.LaunchConfig:
    b, q, _, hq, hk, d = _heads(r)
    return lc.attention_prefill_config(b, q, hq, hk, d, on_gpu=t.on_gpu)


def _fa3_decode(r: Row, t: Target) -> lc.LaunchConfig:
    b, _, kv, hq, hk, d = _heads(r)
    if int(r["k_bits"]) == 4:
        raise ValueError("FA3 has no 4-bit KV cache (16 or fp8 only)")
    r["kv_block"] = None  # FA3's paged cache is not mpsim's block layout
    return lc.fa3_decode_config(b, hq, hk, d, kv, sms=t.sms)


def _fa3_prefill(r: Row, t: Target) -> lc.LaunchConfig:
    b, q, kv, hq, hk, d = _heads(r)
    if kv != q:
        raise ValueError("FA3 prefill rows attend within the prompt (kv_len == q_len); a chunk after "
                         "cached tokens is not modelled (serve: --no-chunked-prefill)")
    return lc.fa3_prefill_config(b, q, hq, hk, d, sms=t.sms)


def _kv_write(r: Row, t: Target) -> lc.LaunchConfig:
    return lc.kv_quant_config(int(r["batch"]) * int(r["q_len"]), int(r["num_kv_heads"]),
                              int(r["head_dim"]), int(r["k_bits"]), on_gpu=t.on_gpu)


def _mpsim_rowwise(kernel: str) -> Builder:
    def build(r: Row, t: Target) -> lc.LaunchConfig:
        if "num_q_heads" in r:  # mpsim's row-wise rows carry sizes only (vLLM's rotary rows: heads)
            r.update(num_q_heads=None, num_kv_heads=None, head_dim=None)
        return lc.rowwise_config(kernel, int(r["m"]), _opt(r.get("k")) or int(r["n"]), on_gpu=t.on_gpu)
    return build


def _framework(kernel: str) -> Builder:
    def build(r: Row, t: Target) -> lc.LaunchConfig:
        hq, hk, d, _ = t.heads
        if kernel == lc.VLLM_ROPE:  # the rotary kernel's block follows the heads
            r.update(num_q_heads=hq, num_kv_heads=hk, head_dim=d)
        return lc.framework_rowwise_config(kernel, int(r["m"]), int(r["n"]), heads=hq, head_dim=d)
    return build


def _opt(value: Any) -> int | None:
    """An optional integer column value (None or pandas' NA: not applicable)."""
    try:
        return None if value is None or value != value else int(value)
    except TypeError:  # pandas.NA: `NA != NA` is NA, whose truth value raises
        return None


BUILDERS: dict[str, Builder] = {
    **dict.fromkeys(MPSIM_GEMM, _mpsim_gemm),
    lc.DECODE_ATTENTION_KERNEL: _mpsim_decode, "attention_prefill_kernel": _mpsim_prefill,
    MPSIM_KV_WRITE: _kv_write,
    **{k: _mpsim_rowwise(k) for k in MPSIM_ROWWISE},
    lc.CUBLAS_GEMM: _cublas, lc.TRTLLM_WO_GEMV: _trtllm_wo,
    lc.FA3_DECODE: _fa3_decode, lc.FA3_PREFILL: _fa3_prefill,
    **{k: _framework(k) for k in (lc.VLLM_RMS_NORM, lc.VLLM_ROPE, lc.VLLM_SILU_MUL, lc.TORCH_ADD)},
}
assert set(BUILDERS) == {*MPSIM_GEMM, *MPSIM_ATTENTION, MPSIM_KV_WRITE, *MPSIM_ROWWISE, *lc.EXTERNAL_KERNELS}

# The kernels of the dispatch table that can serve each op of an engine file.
KERNELS_BY_OP: dict[str, tuple[str, ...]] = {
    "embed": ("embedding_kernel",),
    "rms_norm": ("rms_norm_kernel", lc.VLLM_RMS_NORM),
    "layer_norm": ("layer_norm_kernel",),
    "gemm": (*MPSIM_GEMM, lc.CUBLAS_GEMM, lc.TRTLLM_WO_GEMV),
    "rope": ("rope_kernel", lc.VLLM_ROPE),
    "kv_write": (MPSIM_KV_WRITE,),
    "decode_attention": (lc.DECODE_ATTENTION_KERNEL, lc.FA3_DECODE),
    "prefill_attention": ("attention_prefill_kernel", lc.FA3_PREFILL),
    "silu_mul": ("silu_mul_kernel", lc.VLLM_SILU_MUL),
    "gelu": ("gelu_kernel",),
    "residual_add": ("residual_add_kernel", lc.TORCH_ADD),
    "sample": ("argmax_kernel",),
}
assert {k for ks in KERNELS_BY_OP.values() for k in ks} == set(BUILDERS)
