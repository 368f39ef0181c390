"""Speed of the numba references on this machine: GEMV per format, and every op at real model shapes.

GEMV (M = 1) at 4096x4096 and 11008x4096, per weight format: the public numba wrapper (widening and
checks included), its numba core alone (inputs already prepared), and numpy dequantize-then-matmul
(the format's numpy dequantization to fp16, widening, BLAS fp32 GEMV). Median of REPEATS runs in one
process, after one warm-up run (numba compile and cache load excluded). The op table times each
reference at Llama-2-7B shapes (hidden 4096, FFN 11008, 32 heads, head_dim 128, KV length 4096).
Writes analysis/results/bench_reference_gemv.csv, bench_reference_ops.csv and the "speed" section of
docs/numerics-tables.md.

    python -m mpsim.analysis.bench.reference [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from mpsim.analysis.numerics_quality import RESULTS, markdown, write_section
from mpsim.reference.activations import gelu_ref, silu_mul_ref
from mpsim.reference.anyprec import dequantize_anyprec, quantize_anyprec
from mpsim.reference.attention_decode import attention_decode_ref
from mpsim.reference.attention_prefill import attention_prefill_ref
from mpsim.reference.elementwise import embedding_ref, residual_add_ref
from mpsim.reference.gemm_anyprec import gemm_anyprec_f32, gemm_anyprec_weight_ref
from mpsim.reference.gemm_fp16 import gemm_f32, gemm_fp16_ref
from mpsim.reference.gemm_group import gemm_group_f32, gemm_group_weight_ref
from mpsim.reference.group_quant import dequantize_group, quantize_group
from mpsim.reference.kv_quant import kv_quant_ref
from mpsim.reference.norms import layer_norm_ref, rms_norm_ref
from mpsim.reference.rope import rope_ref
from mpsim.reference.sampling import argmax_ref
from mpsim.traces.atomic import write_csv_atomic

GEMV_SHAPES = ((4096, 4096), (11008, 4096))
HIDDEN, FFN, HEADS, HEAD_DIM, KV_LEN, VOCAB = 4096, 11008, 32, 128, 4096, 32000


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of fn() in ms over `repeats` runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


@dataclass(frozen=True)
class GemvCase:
    """One weight format: the public numba wrapper, its core alone, and numpy's dequant + matmul."""

    fmt: str
    wrapper: Callable[[], object]
    core: Callable[[], object]
    numpy_path: Callable[[], object]


def _numpy_gemv(x: np.ndarray, dequant: Callable[[], np.ndarray]) -> np.ndarray:
    """Dequantize to fp16 with the format's numpy code, widen, BLAS fp32 GEMV."""
    return x.astype(np.float32) @ dequant().astype(np.float32).T


def _gemv_cases(w: np.ndarray) -> list[GemvCase]:
    x = np.random.default_rng(1).standard_normal((1, w.shape[1])).astype(np.float16)
    xt, b0 = np.ascontiguousarray(x.T, np.float32), np.zeros(w.shape[0], np.float32)
    cases = [
        GemvCase(
            "fp16",
            partial(gemm_fp16_ref, x, w),
            partial(gemm_f32, xt, w.astype(np.float32), b0),
            partial(_numpy_gemv, x, lambda: w),
        )
    ]
    for bits in (8, 4, 3, 2):
        gw = quantize_group(w, bits, 128)
        s32, z32 = gw.scales.astype(np.float32), gw.zeros.astype(np.float32)
        words = gw.qweight.view(np.uint32)
        cases.append(GemvCase(
            f"int{bits}-group g128",
            partial(gemm_group_weight_ref, x, gw),
            partial(gemm_group_f32, xt, words, s32, z32, bits, 128, b0),
            partial(_numpy_gemv, x, partial(dequantize_group, gw)),
        ))  # fmt: skip
    apw = quantize_anyprec(w, 4, 2)
    for bits in (4, 3, 2):
        lut = apw.luts[bits].astype(np.float32)
        cases.append(GemvCase(
            f"anyprec {bits}-bit",
            partial(gemm_anyprec_weight_ref, x, apw, bits),
            partial(gemm_anyprec_f32, xt, apw.qweight.view(np.uint32), lut, bits, b0),
            partial(_numpy_gemv, x, partial(dequantize_anyprec, apw, bits)),
        ))  # fmt: skip
    return cases


def bench_gemv(repeats: int) -> pd.DataFrame:
    rows = []
    for n, k in GEMV_SHAPES:
        w = (np.random.default_rng(n).standard_normal((n, k)) * 0.02).astype(np.float16)
        for case in _gemv_cases(w):
            rows.append({
                "N x K": f"{n}x{k}", "format": case.fmt,
                "numba wrapper ms": median_ms(case.wrapper, repeats),
                "numba core ms": median_ms(case.core, repeats),
                "numpy dequant+matmul ms": median_ms(case.numpy_path, repeats),
            })  # fmt: skip
            print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def _rand(shape: tuple, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal(shape) * scale).astype(np.float16)


def _op_cases() -> list[tuple[str, str, Callable[[], object]]]:
    t = 4096  # prompt tokens for token-parallel ops
    x, w = _rand((t, HIDDEN)), _rand((HIDDEN,))
    gu, qkv = _rand((512, 2 * FFN)), _rand((t, HEADS, HEAD_DIM))
    kv = _rand((1, HEADS, KV_LEN, HEAD_DIM))
    c8, s8, z8 = kv_quant_ref(kv, 8)
    c4, s4, z4 = kv_quant_ref(kv, 4)
    q1, lens = _rand((1, HEADS, HEAD_DIM)), np.array([KV_LEN])
    w_sq, w_up = _rand((HIDDEN, HIDDEN), 0.02), _rand((FFN, HIDDEN), 0.02)
    x512 = _rand((512, HIDDEN))
    g4 = quantize_group(w_up, 4, 128)
    pre512 = _rand((1, 512, HEADS, HEAD_DIM))
    pre4k = _rand((1, KV_LEN, HEADS, HEAD_DIM))
    table = _rand((VOCAB, HIDDEN))
    return [
        ("rms_norm", f"{t}x{HIDDEN}", lambda: rms_norm_ref(x, w, 1e-6)),
        ("layer_norm", f"{t}x{HIDDEN}", lambda: layer_norm_ref(x, w, w, 1e-5)),
        ("rope", f"{t}x{HEADS}x{HEAD_DIM}", lambda: rope_ref(qkv, np.arange(t), HEAD_DIM, 1e4)),
        ("silu_mul", f"512x{2 * FFN}", lambda: silu_mul_ref(gu)),
        ("gelu", f"512x{2 * FFN}", lambda: gelu_ref(gu)),
        ("residual_add", f"{t}x{HIDDEN}", lambda: residual_add_ref(x, x)),
        ("embedding", f"{t} ids, {VOCAB}x{HIDDEN}", lambda: embedding_ref(np.arange(t), table)),
        ("argmax", f"8x{VOCAB}", lambda: argmax_ref(_rand((8, VOCAB)))),
        ("kv_quant int8", f"{HEADS}x{KV_LEN}x{HEAD_DIM}", lambda: kv_quant_ref(kv, 8)),
        ("kv_quant int4", f"{HEADS}x{KV_LEN}x{HEAD_DIM}", lambda: kv_quant_ref(kv, 4)),
        ("decode attn fp16 KV", f"B1 H{HEADS} KV{KV_LEN}",
         lambda: attention_decode_ref(q1, kv, kv, lens, 16, 16)),
        ("decode attn int8 KV", f"B1 H{HEADS} KV{KV_LEN}",
         lambda: attention_decode_ref(q1, c8, c8, lens, 8, 8, s8, z8, s8, z8)),
        ("decode attn int4 KV", f"B1 H{HEADS} KV{KV_LEN}",
         lambda: attention_decode_ref(q1, c4, c4, lens, 4, 4, s4, z4, s4, z4)),
        ("prefill attn causal", f"T512 H{HEADS}", lambda: attention_prefill_ref(pre512, pre512, pre512)),
        ("prefill attn causal", f"T{KV_LEN} H{HEADS}", lambda: attention_prefill_ref(pre4k, pre4k, pre4k)),
        ("gemm fp16", f"512x{HIDDEN}x{HIDDEN}", lambda: gemm_fp16_ref(x512, w_sq)),
        ("gemm int4-group g128", f"512x{FFN}x{HIDDEN}", lambda: gemm_group_weight_ref(x512, g4)),
        ("quantize int4-group g128", f"{FFN}x{HIDDEN}", lambda: quantize_group(w_up, 4, 128)),
        ("quantize anyprec 2->8", f"{HIDDEN}x{HIDDEN}", lambda: quantize_anyprec(w_sq, 8, 2)),
    ]  # fmt: skip


def bench_ops(repeats: int) -> pd.DataFrame:
    rows = []
    for op, shape, fn in _op_cases():
        t0 = time.perf_counter()
        fn()  # warm-up (and the only run for slow ops)
        first = time.perf_counter() - t0
        ms = median_ms(fn, repeats) if first < 1.0 else 1e3 * first
        rows.append({"op": op, "shape": shape, "ms": ms, "runs": repeats if first < 1.0 else 1})
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    gemv, ops = bench_gemv(args.repeats), bench_ops(args.repeats)
    share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(gemv, RESULTS / "bench_reference_gemv.csv", index=False)
    write_csv_atomic(ops, RESULTS / "bench_reference_ops.csv", index=False)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numba single-threaded"
    text = (
        "## Reference speed (analysis/bench/reference.py)\n\n"
        f"Machine: {machine}. This run's process CPU time / wall time: {share:.2f} (1.0 = a core "
        "of its own; below that, other jobs shared the cores and every time is inflated by about "
        f"1/share). Median of {args.repeats} runs after a warm-up (compile excluded); ops slower "
        "than 1 s ran once. numpy dequant+matmul uses the reference's own numpy dequantization "
        "(reference/group_quant.py, anyprec.py), not a tuned unpacker.\n\n"
        "### GEMV (M = 1), numba reference vs numpy dequantize-then-matmul\n\n"
        + markdown(gemv)
        + "\n### Every reference op at Llama-2-7B shapes\n\n"
        + markdown(ops)
    )
    write_section("speed", text)


if __name__ == "__main__":
    main()
