"""Probes of the two GPU mechanisms behind the largest open fp8 errors (docs/validation.md#the-gpu-kit),
what the GPU kit's `probes` step runs (scripts/gpu-check.sh).

    python -m mpsim.analysis.bench.hw_probes --out hw_probes.csv [--probes operands,edge]
        [--warm-s 0.5] [--repeats 20] [--calls 10] [--dry-run]

1. `operands`: the published GEMM tables come from collectors that feed their kernels different
   operand values (ai-dynamo/aiconfigurator collector/*/collect_gemm.py): vLLM 0.24.0's fp8 weights
   all 0.01 (`gemm.weight.fill_(0.01)`), TensorRT-LLM's randn cast to e4m3, SGLang's uniform over
   +-448; the activations randn. On H200 the same CUTLASS fp8 kernel (128 x 128 x 128, 2 x 1
   cluster, ping-pong) runs SGLang's 4096^3 call in 109.5 us and vLLM's in 135.8 (SGLang's fp8 rows
   0.72-0.78x vLLM's at M >= 2048, its bf16 rows 1.08x). A compute-bound GEMM runs at a
   power-limited clock, and a tensor core's switching power depends on the bits it multiplies. The
   probe times cuBLASLt's fp8 GEMM (torch._scaled_mm) on each collector's weight values, and the
   bf16 GEMM on randn / constant / zero operands as the control, back to back after a warm-up long
   enough for the clock to settle: if the times differ as the collectors' rows do, the operand
   values are a property of the measurement that the model should read per row, as it reads the
   weight copies a collector cycled.
2. `edge`: one token row past a multiple of 128 costs 1.6-2x in the published CUTLASS and
   DeepGEMM-derived fp8 rows (e.g. H100 vLLM n = k = 8192: 117.9 us at M = 1024, 194.3 at 1025,
   156.5 at 1280) and little in cuBLASLt's (TensorRT-LLM fp8: 117.6 / 120.8 / 145.7): at the same
   tile count the partial tile costs 7-27% more, where the simulator's TMA edge
   (SimParams.tma_edge_cost: the box rows beyond M as L2 load) gives 1-2%. The probe times one
   Triton GEMM two ways, its operands through tensor descriptors (TMA on sm_90) or through masked
   pointer loads, and torch's GEMM (cuBLAS), at M one past a multiple of the 128-row tile and at
   the next multiple, N = K = 8192: `ratio` t(M) / t(next multiple) under TMA against pointer loads
   says whether the box rows past M cost time, and how much.

Rows: probe, variant, dtype, m, n, k, median_us, tflops, ratio (to the probe's reference: the
randn operands, or the same kernel at the next multiple of the tile), calls, status. Without CUDA
(`--dry-run`: the Triton interpreter at tiny shapes, host-clock times) the fp8 rows say why they
did not run; nothing here is a GPU time then.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from mpsim.traces.atomic import write_csv_atomic

COLUMNS = ("probe", "variant", "dtype", "m", "n", "k", "median_us", "tflops", "ratio", "calls", "status")
E4M3_MAX = 448.0
# the collectors' fp8 weight values (module docstring)
WEIGHT_KINDS = ("randn", "constant", "uniform", "zeros")
OPERAND_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))
EDGE_TILE = (128, 128, 64)  # the probe GEMM's (BM, BN, BK) on a GPU
EDGE_MS = (512, 513, 640, 1024, 1025, 1152, 2048, 2049, 2176)
EDGE_NK = 8192
DRY_TILE, DRY_MS, DRY_NK = (32, 32, 32), (32, 33, 64), 64


def fp8_weight(kind: str, n: int, k: int, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    """An n x k e4m3 weight as a collector builds it: `randn` (TensorRT-LLM: randn cast), `constant`
    (vLLM 0.24.0: every weight 0.01), `uniform` (SGLang: uniform over +-448), `zeros`."""
    if kind == "randn":
        w = torch.randn(n, k, generator=gen, device=device)
    elif kind == "constant":
        w = torch.full((n, k), 0.01, device=device)
    elif kind == "uniform":
        w = (torch.rand(n, k, generator=gen, device=device) - 0.5) * 2 * E4M3_MAX
    elif kind == "zeros":
        w = torch.zeros(n, k, device=device)
    else:
        raise ValueError(f"weight kind {kind!r}: expected one of {WEIGHT_KINDS}")
    return w.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def fp8_tokens(m: int, k: int, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    """randn activations quantized per token to e4m3 (each row's largest magnitude at 448)."""
    x = torch.randn(m, k, generator=gen, device=device)
    scale = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / E4M3_MAX
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def sustained_us(fn: Callable[[], object], warm_s: float, repeats: int, calls: int,
                 cuda: bool) -> float:
    """Median time per call of `calls` back-to-back calls, `repeats` times, after `warm_s` seconds
    of the same calls (the clock settles under the power limit as in a collector's replays)."""
    end = time.perf_counter() + warm_s
    fn()
    while time.perf_counter() < end:
        fn()
        if cuda:
            torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        if cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            stop.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(stop) * 1e3 / calls)
        else:
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter_ns() - t0) / 1e3 / calls)
    return statistics.median(samples)


def _row(probe: str, variant: str, dtype: str, shape: tuple[int, int, int], us: float | None,
         calls: int, status: str) -> dict[str, object]:
    m, n, k = shape
    tflops = 2.0 * m * n * k / (us * 1e6) if us else None
    return {"probe": probe, "variant": variant, "dtype": dtype, "m": m, "n": n, "k": k,
            "median_us": us, "tflops": tflops, "ratio": None, "calls": calls, "status": status}


def fp8_ready(device: torch.device) -> str:
    """'' when this device runs torch._scaled_mm on e4m3, else why not."""
    if device.type != "cuda":
        return "skipped: no CUDA (torch._scaled_mm's fp8 GEMM needs a GPU with fp8 tensor cores)"
    if torch.cuda.get_device_capability(device) < (8, 9):
        return "skipped: no fp8 tensor cores (compute capability below 8.9)"
    return ""


def fp8_rows(device: torch.device, shape: tuple[int, int, int], warm_s: float, repeats: int,
             calls: int, gen: torch.Generator) -> list[dict[str, object]]:
    """cuBLASLt's fp8 GEMM (torch._scaled_mm, per-tensor scales of 1, fast accumulation as vLLM's
    and SGLang's CUTLASS kernels run) on each collector's weight values, randn activations
    quantized per token (zeros with the zero weights)."""
    why = fp8_ready(device)
    if why:
        return [_row("operands", kind, "fp8", shape, None, 0, why) for kind in WEIGHT_KINDS]
    m, n, k = shape
    x, one = fp8_tokens(m, k, device, gen), torch.ones((), device=device)
    rows = []
    for kind in WEIGHT_KINDS:
        w = fp8_weight(kind, n, k, device, gen)
        a = torch.zeros_like(x) if kind == "zeros" else x

        def call(a: torch.Tensor = a, w: torch.Tensor = w, one: torch.Tensor = one) -> object:
            return torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True)

        rows.append(_row("operands", kind, "fp8", shape, sustained_us(call, warm_s, repeats, calls, True),
                         calls, "ok"))
    return rows


def bf16_rows(device: torch.device, shape: tuple[int, int, int], warm_s: float, repeats: int,
              calls: int, gen: torch.Generator) -> list[dict[str, object]]:
    """The 16-bit GEMM (bf16 on a GPU, fp32 on a CPU) on randn, constant (0.01) and zero operands."""
    m, n, k = shape
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    rows = []
    for kind in ("randn", "constant", "zeros"):
        a = torch.randn(m, k, generator=gen, device=device).to(dtype)
        w = torch.randn(n, k, generator=gen, device=device).to(dtype)
        if kind != "randn":
            fill = 0.01 if kind == "constant" else 0.0
            a, w = torch.full_like(a, fill), torch.full_like(w, fill)

        def mm(a: torch.Tensor = a, w: torch.Tensor = w) -> object:
            return a @ w.t()

        rows.append(_row("operands", kind, str(dtype).removeprefix("torch."), shape,
                         sustained_us(mm, warm_s, repeats, calls, cuda), calls, "ok"))
    return rows


def operands_probe(device: torch.device, shapes: Sequence[tuple[int, int, int]], warm_s: float,
                   repeats: int, calls: int) -> list[dict[str, object]]:
    """Probe 1 (module docstring): the fp8 rows, then the 16-bit control, per shape."""
    gen = torch.Generator(device=device).manual_seed(0)
    rows: list[dict[str, object]] = []
    for shape in shapes:
        rows += fp8_rows(device, shape, warm_s, repeats, calls, gen)
        rows += bf16_rows(device, shape, warm_s, repeats, calls, gen)
    return rows


@triton.jit
def _gemm_tma(a_desc, b_desc, c_desc, N, K,  # type: ignore[no-untyped-def]
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A B^T, one BM x BN tile a program, both operands through tensor descriptors (TMA on
    sm_90: a box past A's last row comes back zero-filled)."""
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BN), pid % tl.cdiv(N, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(0, K, BK):
        a = a_desc.load([pid_m * BM, kk])
        b = b_desc.load([pid_n * BN, kk])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@triton.jit
def _gemm_ptr(a_ptr, b_ptr, c_ptr, M, N, K,  # type: ignore[no-untyped-def]
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The same GEMM with pointer loads, the rows past M masked (N and K whole tiles)."""
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BN), pid % tl.cdiv(N, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (kk + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (kk + rk)[None, :])
        acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=rm[:, None] < M)


def edge_gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tile: tuple[int, int, int],
              tma: bool) -> Callable[[], object]:
    """A launcher of the probe GEMM c = a b^T (a: M x K, b: N x K) by TMA or pointer loads."""
    (m, k), n = a.shape, b.shape[0]
    bm, bn, bk = tile
    if n % bn or k % bk:
        raise ValueError(f"the edge probe needs N ({n}) and K ({k}) in whole {bn} / {bk} tiles")
    grid = (triton.cdiv(m, bm) * (n // bn),)
    warps = 8 if bm * bn >= 128 * 128 else 4
    if tma:
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
                 TensorDescriptor.from_tensor(c, [bm, bn]))
        return lambda: _gemm_tma[grid](*descs, n, k, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=3)
    return lambda: _gemm_ptr[grid](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=3)


def edge_probe(device: torch.device, ms: Sequence[int], nk: int, tile: tuple[int, int, int],
               warm_s: float, repeats: int, calls: int) -> list[dict[str, object]]:
    """The probe GEMM by TMA and by pointer loads, and torch's GEMM, at each M (probe 2); `ratio`:
    t(M) / t(the next multiple of the tile's rows) of the same variant, where both were timed."""
    gen = torch.Generator(device=device).manual_seed(1)
    cuda = device.type == "cuda"
    b = torch.randn(nk, nk, generator=gen, device=device).to(torch.float16)
    rows: list[dict[str, object]] = []
    for m in ms:
        a = torch.randn(m, nk, generator=gen, device=device).to(torch.float16)
        c = torch.empty(m, nk, dtype=torch.float16, device=device)

        def torch_mm(a: torch.Tensor = a) -> object:
            return a @ b.t() if cuda else a.float() @ b.float().t()

        variants = {"triton-tma": edge_gemm(a, b, c, tile, True),
                    "triton-pointers": edge_gemm(a, b, c, tile, False), "torch": torch_mm}
        for name, fn in variants.items():
            rows.append(_row("edge", name, "float16", (m, nk, nk),
                             sustained_us(fn, warm_s, repeats, calls, cuda), calls, "ok"))
    return with_edge_ratios(rows, tile[0])


def with_edge_ratios(rows: list[dict[str, object]], tile_m: int) -> list[dict[str, object]]:
    """Each edge row's time over its variant's at the next multiple of `tile_m` (when timed)."""
    times = {(r["variant"], r["m"]): r["median_us"] for r in rows}
    for r in rows:
        m = int(r["m"])  # type: ignore[call-overload]
        whole = -(-m // tile_m) * tile_m
        ref = times.get((r["variant"], whole))
        if r["median_us"] and ref:
            r["ratio"] = float(r["median_us"]) / float(ref)  # type: ignore[arg-type]
    return rows


def with_operand_ratios(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each operand row's time over the randn row of its dtype and shape."""
    ref = {(r["dtype"], r["m"], r["n"], r["k"]): r["median_us"] for r in rows if r["variant"] == "randn"}
    for r in rows:
        base = ref.get((r["dtype"], r["m"], r["n"], r["k"]))
        if r["median_us"] and base:
            r["ratio"] = float(r["median_us"]) / float(base)  # type: ignore[arg-type]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="CSV to write")
    ap.add_argument("--probes", default="operands,edge", help="comma list of: operands, edge")
    ap.add_argument("--warm-s", type=float, default=0.5, help="seconds of warm-up per timed case")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--calls", type=int, default=10, help="back-to-back calls per timed repeat")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes (no GPU times)")
    args = ap.parse_args(argv)
    probes = [p for p in args.probes.split(",") if p]
    unknown = sorted(set(probes) - {"operands", "edge"})
    if unknown or args.repeats < 1 or args.calls < 1 or args.warm_s < 0:
        ap.error(f"--probes {unknown} unknown (operands, edge)" if unknown
                 else "--repeats and --calls must be >= 1, --warm-s >= 0")
    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.device("cuda" if cuda else "cpu")
    rows: list[dict[str, object]] = []
    if "operands" in probes:
        shapes = OPERAND_SHAPES if cuda else ((64, 64, 64),)
        rows += with_operand_ratios(operands_probe(device, shapes, args.warm_s, args.repeats, args.calls))
    if "edge" in probes:
        ms, nk, tile = (EDGE_MS, EDGE_NK, EDGE_TILE) if cuda else (DRY_MS, DRY_NK, DRY_TILE)
        rows += edge_probe(device, ms, nk, tile, args.warm_s, args.repeats, args.calls)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    write_csv_atomic(table, args.out, index=False)
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
